"""Write a Parquet or Arrow file of one column: argv = OUT_PATH COLUMN_NAME JSON_VALUES (needs pyarrow)."""

import json
import sys

import pyarrow as pa
import pyarrow.parquet as pq

out, name, values = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
table = pa.table({name: values})
if out.endswith(".parquet"):
    pq.write_table(table, out)
else:
    with pa.ipc.new_file(out, table.schema) as w:
        w.write_table(table)
print(json.dumps({"rows": table.num_rows}))
