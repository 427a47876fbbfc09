"""cli.py — how the export/ tools end on bad input: one line on stderr and
exit status 1, not a traceback. A missing or unreadable file (OSError), a
file that is not what it claims (qkvfile.FormatError and the other
ValueErrors: a bad header, a token id out of range), a pickle or torch file
that does not load: each is the user's input, not the tool's bug.

    if __name__ == "__main__":
        cli.run(main)
"""
import os
import pickle
import sys


def run(main):
    try:
        main()
    except (OSError, ValueError, EOFError, pickle.UnpicklingError) as e:
        sys.exit("%s: error: %s" % (os.path.basename(sys.argv[0]), e))
