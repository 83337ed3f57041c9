"""What a process miner computes on any DataFrame of events: the views (directly-follows graph,
variants, cases), pm4py's log filters and the job's filter plan, the statistics, the Inductive
Miner, Petri nets, token replay and the process map."""
