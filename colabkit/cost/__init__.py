"""What a result costs: the hourly rates of runtimes with their sources (rates, and the shipped rates.yaml), and
compute units, dollars and joules per unit of work of a run (per_unit). docs/cost.md."""
