"""The fleet gate: every rank of a multi-node job runs its own check, rank 0 shows them side by side.

ranks.py finds this process's place in the job from the launcher's variables (torchrun, srun, an
indexed Kubernetes Job); summary.py turns a report into the few-KB record a rank sends (record.py: its
typed values) and checks records read from files (report_check.py: each field's type); gather.py moves
the records to rank 0 over torch.distributed (a gloo group, CPU only) with the TCPStore as the control
plane that names ranks that never join or die (each missing rank's kind); table.py renders the fleet
table and the differences that matter; compare.py does the same for report files collected another way.
"""
