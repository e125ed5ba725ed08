"""Print, as JSON, which closure cells verify's instrument finds in each fast-function slot of a modeling
module (argv[1], e.g. transformers.models.qwen3_5.modeling_qwen3_5) for the functions in argv[2:]."""

import importlib
import json
import sys

from kernelcheck.verify.instrument import _closure_cells

mod = importlib.import_module(sys.argv[1])
print(json.dumps({fn: sorted(_closure_cells(getattr(mod, fn))) for fn in sys.argv[2:]}))
