"""Training helpers notebooks call after `setup_device`: what Keras's own fit is handed and read back by (trainer:
`Trainer`, which colabkit exports as `colabkit.Trainer`), the timer callback (timer), set-up of precision, batch sizes
and datasets (setup), fit and predictions (fit), the multi-worker loop (multiworker), model FLOPs and MFU
(flops), the bottleneck passes (breakdown), the weather forecast's windows and loss (timeseries) and greedy
decode with a key-value cache (decode): these import Keras. Plain arithmetic that imports no Keras, for the
sweep, the declarations and the report too: the parameters' vocabularies (choices), the roofline (roofline),
the memory a training run and a decode need, and a decode's FLOPs and bytes (memory). Importing this package
imports none of them.
"""
