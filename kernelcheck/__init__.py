"""kernelcheck: will the fast kernels of a transformers model really run here? And if not, why, and the fix."""

__version__ = "0.1.0"
SCHEMA = "kernelcheck.report/1"  # 0.1's one id; each report kind has its own now: kernelcheck/schemas
