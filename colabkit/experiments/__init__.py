"""The suite's experiments, each declared once (notebook, typed parameters, metrics, headline,
published references), and the registry everything else reads them from.

    from colabkit.experiments import all_experiments, get
    get("cnn_mnist").parameter("batch_size").problem(0)   # "batch_size = 0: expected an int >= 1"

A declaration outside colabkit is found through COLABKIT_EXPERIMENTS (docs/adding-an-experiment.md).
"""

from colabkit.experiments.declaration import (
    Experiment,
    Headline,
    Parameter,
    Reference,
    backend_parameter,
    check_values,
    device_parameter,
    results_path_parameter,
    rule_problems,
)
from colabkit.experiments.registry import (
    ENVIRONMENT_VARIABLE,
    all_experiments,
    find,
    get,
    register,
)

__all__ = ["ENVIRONMENT_VARIABLE", "Experiment", "Headline", "Parameter", "Reference", "all_experiments",
           "backend_parameter", "check_values", "device_parameter", "find", "get", "register", "results_path_parameter",
           "rule_problems"]
