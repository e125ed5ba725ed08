"""`kernelcheck padding`: how much of each step is padding, and what packing would save."""
