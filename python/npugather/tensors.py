"""From a gathered DataFrame to one NumPy array inside each rank's task.

``all_gather_on_npu(df).mapInArrow(fn, schema)`` runs ``fn`` once per rank with the rank's
whole gathered partition as Arrow record batches. :func:`gathered_tensor` turns those batches
into ``x[rank_size, rows, features]``, x[q] being rank q's rows, with Arrow and NumPy doing the
work (no Python loop over rows)::

    def score(batches):
        x = npugather.gathered_tensor(batches, ["embedding"])   # float32[ranks, rows, dim]
        # torch.from_numpy(x) shares the memory, if torch is wanted
        yield pyarrow.RecordBatch.from_pydict({"total": [float(x.sum())]})

    all_gather_on_npu(df).mapInArrow(score, "total double").collect()

The columns are numeric columns (float, double, int, bigint, smallint, tinyint; one feature
each, in the order given) or one ``array<float>`` (or ``array<double>``) column whose rows all
have the same length, as in the JVM's ``NpuGather.onRanks``. Nulls are an error.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy
    import pyarrow

_NUMERIC = ("float", "double", "int32", "int64", "int16", "int8")
_ALLOWED = (
    "numeric columns (float, double, int, bigint, smallint, tinyint) or one array<float> column"
)


def gathered_tensor(
    batches: pyarrow.Table | Iterable[pyarrow.RecordBatch],
    columns: Sequence[str],
    *,
    source_rank_column: str = "source_rank",
    rank_size: int | None = None,
    dtype: numpy.typing.DTypeLike = "float32",
) -> numpy.ndarray:
    """The gathered rows of ``columns`` as one array ``[rank_size, rows, features]``.

    Args:
        batches: the record batches ``mapInArrow`` hands a task of a gathered DataFrame (or a
            ``pyarrow.Table`` of them): every rank's rows, rank-major, with the source-rank
            column.
        columns: numeric columns (one feature each) or one array column.
        source_rank_column: the source-rank column of the gather.
        rank_size: the number of ranks; default: the highest source rank + 1.
        dtype: the array's dtype (default float32; values are converted as NumPy's
            ``astype`` does).

    Returns:
        A C-contiguous array; ``x[q]`` holds rank q's rows in their gathered order.

    Raises:
        ValueError: rows not in rank-major order, ranks with different row counts (every
            rank's count is listed), arrays of different lengths, or a null.
        TypeError: a column of another type, or no columns.
    """
    import numpy as np

    table = _table(batches, columns)
    if table is None:
        return np.zeros((rank_size or 0, 0, len(columns)), dtype=dtype)
    ranks = _rank_major(table, source_rank_column)
    counts = np.bincount(ranks, minlength=rank_size or 0)
    if rank_size is not None and len(counts) > rank_size:
        raise ValueError(
            f"rank_size = {rank_size} is invalid; allowed: more than the highest"
            f" source rank ({len(counts) - 1})"
        )
    rows = int(counts[0]) if len(counts) else 0
    if np.any(counts != rows):
        shapes = ", ".join(f"rank {q}: {int(n)} rows" for q, n in enumerate(counts))
        raise ValueError(
            f"every rank needs the same number of rows for one [rank_size, rows,"
            f" features] array; got {shapes}"
        )
    features = _features(table, list(columns), ranks, np.dtype(dtype))
    return features.reshape(len(counts), rows, features.shape[1])


def gathered_matrix(
    batches: pyarrow.Table | Iterable[pyarrow.RecordBatch],
    columns: Sequence[str],
    *,
    source_rank_column: str | None = "source_rank",
    dtype: numpy.typing.DTypeLike = "float32",
) -> numpy.ndarray:
    """The gathered rows of ``columns`` as one array ``[rows, features]``, rank-major, for ranks
    of any sizes (:func:`gathered_tensor` is this array split by rank when they are equal).
    ``source_rank_column=None`` takes any Arrow rows (no rank order to check).

    Raises:
        ValueError: rows not in rank-major order, arrays of different lengths, or a null.
        TypeError: a column of another type, or no columns.
    """
    import numpy as np

    table = _table(batches, columns)
    if table is None:
        return np.zeros((0, len(columns)), dtype=dtype)
    ranks = (
        _rank_major(table, source_rank_column)
        if source_rank_column is not None
        else np.zeros(len(table), dtype=np.int32)
    )
    return _features(table, list(columns), ranks, np.dtype(dtype))


def _rank_major(table: pyarrow.Table, source_rank_column: str) -> numpy.ndarray:
    import numpy as np

    ranks: numpy.ndarray = _column(table, source_rank_column).to_numpy(zero_copy_only=False)
    if np.any(np.diff(ranks) < 0):
        raise ValueError(
            f"the rows are not in rank-major order of {source_rank_column!r}:"
            " pass the batches of one task of a gathered DataFrame"
        )
    return ranks


def _table(
    batches: pyarrow.Table | Iterable[pyarrow.RecordBatch], columns: Sequence[str]
) -> pyarrow.Table | None:
    """The batches as one table, None when there are none; checks ``columns`` first."""
    import pyarrow as pa

    if isinstance(columns, str) or not columns:
        raise TypeError(f"columns = {columns!r} is invalid; allowed: a list of {_ALLOWED}")
    if isinstance(batches, pa.Table):
        return batches
    listed: list[pa.RecordBatch] = list(batches)
    return pa.Table.from_batches(listed) if listed else None


def _column(table: pyarrow.Table, name: str) -> pyarrow.Array:
    if name not in table.column_names:
        raise TypeError(
            f"column {name!r} is not in the gathered rows; they have {table.column_names}"
        )
    return table.column(name).combine_chunks()


def _features(
    table: pyarrow.Table, columns: list[str], ranks: numpy.ndarray, dtype: numpy.dtype
) -> numpy.ndarray:
    import numpy as np
    import pyarrow as pa

    arrays = [_column(table, name) for name in columns]
    if len(arrays) == 1 and (
        pa.types.is_list(arrays[0].type)
        or pa.types.is_large_list(arrays[0].type)
        or pa.types.is_fixed_size_list(arrays[0].type)
    ):
        return _list_features(columns[0], arrays[0], ranks, dtype)
    out = np.empty((len(table), len(arrays)), dtype=dtype)
    for j, (name, array) in enumerate(zip(columns, arrays, strict=True)):
        if str(array.type) not in _NUMERIC:
            raise TypeError(f"column {name!r} is {array.type}; allowed: {_ALLOWED}")
        _require_no_nulls(name, array, ranks)
        out[:, j] = array.to_numpy(zero_copy_only=False)
    return out


def _list_features(
    name: str, array: pyarrow.Array, ranks: numpy.ndarray, dtype: numpy.dtype
) -> numpy.ndarray:
    import numpy as np
    import pyarrow as pa

    if not (
        pa.types.is_float32(array.type.value_type) or pa.types.is_float64(array.type.value_type)
    ):
        raise TypeError(f"column {name!r} is {array.type}; allowed: {_ALLOWED}")
    _require_no_nulls(name, array, ranks)
    if pa.types.is_fixed_size_list(array.type):
        lengths = np.full(len(array), array.type.list_size)
    else:
        lengths = np.diff(array.offsets.to_numpy())
    if len(lengths) and np.any(lengths != lengths[0]):
        first = int(np.flatnonzero(lengths != lengths[0])[0])
        raise ValueError(
            f"column {name!r}: row {_where(first, ranks)} has"
            f" {int(lengths[first])} elements, the first row {int(lengths[0])}"
        )
    values = array.flatten()
    _require_no_nulls(f"{name} (an element)", values, None)
    dim = int(lengths[0]) if len(lengths) else 0
    features: numpy.ndarray = values.to_numpy(zero_copy_only=False).astype(dtype, copy=False)
    return features.reshape(-1, dim)


def _require_no_nulls(name: str, array: pyarrow.Array, ranks: numpy.ndarray | None) -> None:
    import numpy as np

    if array.null_count:
        first = int(np.flatnonzero(array.is_null().to_numpy(zero_copy_only=False))[0])
        where = _where(first, ranks) if ranks is not None else f"{first} of the values"
        raise ValueError(f"column {name!r} has a null at row {where}; nulls are not allowed")


def _where(index: int, ranks: numpy.ndarray) -> str:
    """Row ``index`` of the gathered rows as "row i of rank q"."""
    import numpy as np

    rank = int(ranks[index])
    return f"{index - int(np.searchsorted(ranks, rank))} of rank {rank}"
