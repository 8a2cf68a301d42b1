"""`sweep --colab`: this machine's sweep driving Colab runtimes through the Colab CLI (docs/colab.md), unlike
colabkit.colab, which runs inside a runtime. The command (command), one accelerator's sessions (executor), the
`colab` client (client), what a session gets, holds and sends back (sessions), the scripts it runs (scripts)."""
