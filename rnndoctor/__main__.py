from rnndoctor.cli import main

main()
