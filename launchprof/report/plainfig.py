"""Plotly figures as plain dicts: what plotly.js reads, without plotly's figure objects.

Building ``plotly.graph_objects`` figures validates every property through Python
objects (a third of a second for the report's few figures) and importing them costs
more; plotly.js only needs the JSON. A :class:`Figure` here holds the traces and layout
as dicts and serialises them as ``Figure.to_json()`` of plotly 7 would: numeric arrays
as plotly.js typed arrays (``{"dtype", "bdata"}``, int64 narrowed to the smallest
integer type that holds the values, as ``_plotly_utils.utils.to_typed_array_spec``
does), other arrays as lists, and the layout's ``template`` expanded from plotly's own
template file (read as JSON, plotly is not imported).

Property names are plotly's nested ones (``marker={"color": ...}``, not
``marker_color``); the pages load the plotly.min.js of the installed plotly package.
"""

from __future__ import annotations

import base64
import functools
import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

# plotly.js draws its mode bar (zoom, pan, download: about 25 px high, 2 px from the top)
# over the top right of a figure while the pointer is on it; at 800 px a long title ran
# under it. Titles start below it (:func:`titled`).
MODEBAR_PX = 30

# plotly.js typed-array names of numpy dtypes (plotly's ``plotlyjsShortTypes``).
_SHORT_TYPES = {
    "int8": "i1",
    "uint8": "u1",
    "int16": "i2",
    "uint16": "u2",
    "int32": "i4",
    "uint32": "u4",
    "float32": "f4",
    "float64": "f8",
}
# Keys whose arrays plotly keeps as lists (bar ``base`` is an "any" property; ``range``
# is never encoded).
_LIST_KEYS = frozenset({"base", "range"})


def plotly_package_file(*parts: str) -> Path:
    """A file of the installed plotly package (``package_data/...``), found without
    importing plotly.

    Raises:
        ModuleNotFoundError: plotly is not installed.
    """
    spec = importlib.util.find_spec("plotly")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("plotly is not installed")
    return Path(spec.origin).parent.joinpath(*parts)


@functools.lru_cache(maxsize=4)
def _template_text(name: str) -> str:
    return plotly_package_file("package_data", "templates", f"{name}.json").read_text(encoding="utf-8")


def template(name: str) -> dict[str, Any]:
    """Plotly's named layout template (e.g. ``"plotly_white"``) as a new dict."""
    loaded: dict[str, Any] = json.loads(_template_text(name))
    return loaded


class Trace(dict):  # type: ignore[type-arg]
    """One trace's properties; also readable as attributes (``trace.x``), as on plotly's."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def bar(**props: Any) -> Trace:
    """A ``bar`` trace."""
    return Trace(type="bar", **props)


def scatter(**props: Any) -> Trace:
    """A ``scatter`` trace."""
    return Trace(type="scatter", **props)


def heatmap(**props: Any) -> Trace:
    """A ``heatmap`` trace (``z`` a 2-D array; a named ``colorscale`` is not expanded:
    pass the list of ``[position, colour]`` pairs)."""
    return Trace(type="heatmap", **props)


def _typed_array(values: np.ndarray) -> Any:
    """plotly's ``to_typed_array_spec``: numeric arrays as base64 typed arrays."""
    if values.size == 0:
        return values.tolist()
    if values.dtype == np.int64:
        lo, hi = int(values.min()), int(values.max())
        for small in (np.int8, np.int16, np.int32):
            info = np.iinfo(small)
            if info.min <= lo and hi <= info.max:
                values = values.astype(small)
                break
        else:
            return values.tolist()
    short = _SHORT_TYPES.get(str(values.dtype))
    if short is None:
        return values.tolist()
    spec: dict[str, Any] = {"dtype": short, "bdata": base64.b64encode(values.tobytes()).decode("ascii")}
    if values.ndim > 1:
        spec["shape"] = str(values.shape)[1:-1]
    return spec


def _encode(value: Any, key: str | None = None) -> Any:
    if isinstance(value, (pd.Series, pd.Index)):
        value = value.to_numpy()
    if isinstance(value, np.ndarray):
        return value.tolist() if key in _LIST_KEYS or value.dtype == object else _typed_array(value)
    if isinstance(value, dict):
        return {k: _encode(v, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


class Figure:
    """Traces and a layout as plain data; :meth:`to_dict` is the figure's JSON document."""

    def __init__(self, data: list[Trace] | None = None, layout: dict[str, Any] | None = None) -> None:
        self.data: list[Trace] = list(data or [])
        self.layout: dict[str, Any] = dict(layout or {})

    def add_trace(self, trace: Trace) -> Figure:
        self.data.append(trace)
        return self

    def update_layout(self, **props: Any) -> Figure:
        """Merge ``props`` into the layout, dict into dict (``xaxis={"title": ...}``
        keeps the axis's other properties)."""
        _merge(self.layout, props)
        return self

    def update_traces(self, **props: Any) -> Figure:
        for trace in self.data:
            _merge(trace, props)
        return self

    def to_dict(self) -> dict[str, Any]:
        """The figure as plotly.js reads it (the ``template`` name expanded)."""
        layout = _encode(self.layout)
        if isinstance(layout.get("template"), str):
            layout["template"] = template(layout["template"])
        return {"data": [_encode(t) for t in self.data], "layout": layout}


def _merge(target: dict[str, Any], props: dict[str, Any]) -> None:
    for key, value in props.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = value


def titled(text: str, left: int, right: int, top: int, bottom: int, size: int = 15) -> dict[str, Any]:
    """Layout keys for a title at the top left, below plotly's mode bar (:data:`MODEBAR_PX`),
    and the margins (px; ``top`` the room the figure needs above its plot area besides the
    title's band, which is added)."""
    return {
        "title": {
            "text": text,
            "x": 0,
            "xanchor": "left",
            "y": 1,
            "yanchor": "top",
            "yref": "container",
            "pad": {"t": MODEBAR_PX},
            "font": {"size": size},
        },
        "margin": {"l": left, "r": right, "t": top + MODEBAR_PX, "b": bottom},
    }
