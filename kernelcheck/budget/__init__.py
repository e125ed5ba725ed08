"""A step budget: where a profiled step's GPU time goes, by op class, against the physical floor of each class.

`table.py` reads matrix/op_classes.toml (the classes, the name rules, the causes with their fixes) and
matrix/gpus.toml's peaks; `collect.py` gathers what a budget needs during the trace analysis' single pass (the
CPU ranges the rules name, the host's sync calls) and, per step, the GPU time of each class; `floors.py` counts the
FLOPs and bytes of each class from the model's config and the tokens; `build.py` joins them into the budget
(measured, floor, gap, cause and fix per class, MFU, the step time at the floors); `render.py` writes its text and
its picture (SVG).
"""
