"""The doctor's packing section: for each way a job packs, correct, raises, or silently mixes sequences."""
