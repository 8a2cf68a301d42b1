"""From records to a report a paper can use: each experiment's answer in one figure and one short table, the method
once, everything else in the appendix. `python -m colabkit report RESULTS_DIR... --out DIR` builds it (build);
notebooks/report.ipynb calls the same functions (load_report_data, report_style, publish_report). contents puts the
sections in order; headline draws each experiment's figure and table from its declaration; docs/report.md."""

from colabkit.report.backends import backends_section
from colabkit.report.build import build_report, files_written, prepare_output
from colabkit.report.cnn_mnist import cnn_section, cnn_table
from colabkit.report.comparisons import comparisons_section
from colabkit.report.contents import publish_report, report_sections
from colabkit.report.cost import cost_section
from colabkit.report.dblstm_har import dblstm_section, dblstm_table
from colabkit.report.decode import decode_section
from colabkit.report.experiment_sections import SECTIONS, experiment_sections, register_section
from colabkit.report.figures import report_style
from colabkit.report.headline import notebook_section
from colabkit.report.inference import inference_section
from colabkit.report.matmul_tflops import matmul_section, matmul_table
from colabkit.report.methods import methods_section, write_references
from colabkit.report.paradnn import paradnn_section, paradnn_table
from colabkit.report.provenance import overview_section, provenance_section
from colabkit.report.records import ReportData, device_label, load_report_data, report_data
from colabkit.report.section import ReportFigure, ReportTable, Section, section_outputs, write_section
from colabkit.report.summary import configuration_speedups, speedup_table, summary_section
from colabkit.report.timeseries_rnn import prediction_frame, timeseries_section
from colabkit.report.writers import write_figure, write_records_csv

__all__ = [
    "SECTIONS", "ReportData", "ReportFigure", "ReportTable", "Section", "backends_section", "build_report",
    "cnn_section", "cnn_table", "comparisons_section", "configuration_speedups", "cost_section", "dblstm_section",
    "dblstm_table", "decode_section", "device_label", "experiment_sections", "files_written", "inference_section",
    "load_report_data", "matmul_section", "matmul_table", "methods_section", "notebook_section", "overview_section",
    "paradnn_section", "paradnn_table", "prediction_frame", "prepare_output", "provenance_section",
    "publish_report", "register_section", "report_data", "report_sections", "report_style", "section_outputs",
    "speedup_table", "summary_section", "timeseries_section", "write_figure", "write_records_csv",
    "write_references", "write_section",
]
