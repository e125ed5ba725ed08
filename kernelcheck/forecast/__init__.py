"""`doctor --upgrade`: the verdict of the environment pip would produce, computed without touching this one.

resolve.py asks pip what would change (`pip install --dry-run --report`, this environment as the base);
overlay.py installs exactly those distributions into a throwaway `--target` folder (removed after, also on
SIGINT/SIGTERM); command.py runs doctor's static reading in a fresh process before and over the overlay;
diff.py compares the two reports (pure); drift.py names compiled kernel packages a torch-minor change orphans.
"""
