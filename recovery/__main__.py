from recovery.cli import main

main()
