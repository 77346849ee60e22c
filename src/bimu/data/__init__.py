"""Data: IDX reading with checksums, data-directory resolution, fetching, and benchmarks."""

from bimu.data.benchmarks import BENCHMARK_MODULES, available_benchmarks, benchmark_entry, get_benchmark
from bimu.data.idx import ChecksumError, IDXFormatError, read_idx, write_idx
from bimu.data.mnist import DataNotFoundError, load_dataset, verify_dataset
from bimu.data.paths import resolve_data_dir
from bimu.data.registry import register_benchmark

__all__ = [
    "BENCHMARK_MODULES",
    "ChecksumError",
    "DataNotFoundError",
    "IDXFormatError",
    "available_benchmarks",
    "benchmark_entry",
    "get_benchmark",
    "load_dataset",
    "read_idx",
    "register_benchmark",
    "resolve_data_dir",
    "verify_dataset",
    "write_idx",
]
