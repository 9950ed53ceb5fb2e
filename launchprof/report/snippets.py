"""Conversion code for the report, chosen from what the trace shows (written for
launchprof; plain text, escaped by the template)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from launchprof.analysis.diagnosis.diagnose import Diagnosis
from launchprof.analysis.prediction.recommendation import Recommendation
from launchprof.text import count_text, one_line


@dataclass(frozen=True)
class Snippet:
    title: str
    language: str
    note: str
    code: str


TORCH_GRAPH = Snippet(
    "PyTorch: torch.cuda.graph with static inputs",
    "python",
    "Warm up on a side stream (lazy initialisation, cuBLAS workspaces, the allocator) before capture; "
    "then copy each step's data into the static input and replay. The graph keeps the addresses it captured.",
    """import torch

model = model.cuda().eval()
static_x = torch.zeros(batch, features, device="cuda")   # fixed address, fixed shape

side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side), torch.no_grad():
    for _ in range(3):                                     # warm-up, not captured
        model(static_x)
torch.cuda.current_stream().wait_stream(side)

graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph), torch.no_grad():
    static_y = model(static_x)                             # captured once

for x in batches:                                          # the loop: one replay a step
    static_x.copy_(x, non_blocking=True)
    graph.replay()
    consume(static_y)        # no .item()/.cpu() here; read results every k steps
""",
)

TORCH_CALLABLES = Snippet(
    "PyTorch: torch.cuda.make_graphed_callables (training, autograd)",
    "python",
    "Graphs a module's forward and backward; the sample inputs fix shapes, dtypes and requires_grad.",
    """import torch

sample = torch.randn(batch, features, device="cuda", requires_grad=True)
model = torch.cuda.make_graphed_callables(model, (sample,))

for x, y in loader:
    optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(model(x), y)   # forward and backward replay captured graphs
    loss.backward()
    optimizer.step()
""",
)

TORCH_COMPILE = Snippet(
    'PyTorch: torch.compile(mode="reduce-overhead")',
    "python",
    "Compiles and records CUDA graphs for you (one per input shape it sees); fuses kernels too.",
    """import torch

step = torch.compile(model, mode="reduce-overhead")
for x in batches:
    y = step(x)      # first calls compile and record; later calls replay
""",
)

TORCH_BUCKETS = Snippet(
    "PyTorch: a pool of graphs over padded shape buckets",
    "python",
    "One graph per bucket; pad each step's input up to its bucket and slice the output back.",
    """import torch

buckets = BUCKETS                        # e.g. the sizes listed in the dynamic-shapes finding
graphs, inputs, outputs = {}, {}, {}
for n in buckets:                        # capture each bucket once, after a warm-up
    inputs[n] = torch.zeros(n, features, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        model(inputs[n])
    torch.cuda.current_stream().wait_stream(side)
    graphs[n] = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graphs[n]), torch.no_grad():
        outputs[n] = model(inputs[n])

def run(x):
    n = next(b for b in buckets if b >= x.shape[0])   # the smallest bucket that fits
    inputs[n][: x.shape[0]].copy_(x)
    inputs[n][x.shape[0]:].zero_()                      # padding rows
    graphs[n].replay()
    return outputs[n][: x.shape[0]]
""",
)

CUDA_CAPTURE = Snippet(
    "CUDA C++: capture once, instantiate once, launch every step",
    "cpp",
    "Capture on a created stream (not the legacy default stream); allocate before capture; no synchronizing "
    "call between BeginCapture and EndCapture.",
    """cudaStream_t s;
cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);

cudaGraph_t graph;
cudaGraphExec_t exec;
cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
one_step(s);                                   // the step's kernel launches, copies, memsets on s
cudaStreamEndCapture(s, &graph);
cudaGraphInstantiate(&exec, graph, 0);         // once, outside the loop

for (int it = 0; it < steps; ++it) {
    cudaGraphLaunch(exec, s);                  // one call a step
}
cudaStreamSynchronize(s);                      // once, after the loop
cudaGraphExecDestroy(exec);
cudaGraphDestroy(graph);
""",
)

CUDA_UPDATE = Snippet(
    "CUDA C++: new parameters without re-instantiating",
    "cpp",
    "cudaGraphExecUpdate works while the topology (node count, kinds, edges) is unchanged; fall back to "
    "re-instantiation when it fails. For one kernel node, cudaGraphExecKernelNodeSetParams is cheaper still.",
    """cudaGraph_t next;
cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
one_step_with(s, d_in2);                        // same launches, new pointers/arguments
cudaStreamEndCapture(s, &next);

cudaGraphExecUpdateResultInfo info;             // CUDA 12: three-argument form
if (cudaGraphExecUpdate(exec, next, &info) != cudaSuccess) {
    cudaGetLastError();                         // clear the error, then rebuild
    cudaGraphExecDestroy(exec);
    cudaGraphInstantiate(&exec, next, 0);
}
cudaGraphDestroy(next);
cudaGraphLaunch(exec, s);
""",
)


def your_syncs(d: Diagnosis) -> Snippet | None:
    """The user's own synchronizing lines (the ``sync-in-step`` finding's ``where``, from
    the runs without nsys: :mod:`launchprof.analysis.diagnosis.sources`) and what to do at each; None
    without them."""
    finding = next((f for f in d.findings if f.kind == "sync-in-step" and f.where), None)
    if finding is None:
        return None
    blocker = finding.severity == "blocker"
    lines = []
    for w in finding.where:
        at = w["via"] if w["library"] and w["via"] else f"{w['file']}:{w['line']} ({w['function']})"
        what = one_line(f"{w['file']}:{w['line']} ({w['function']}), from your {at}" if w["library"] else at)
        outside = " (between the module calls: keep it outside the graph)" if w.get("outside") else ""
        lines.append(f"# {what}: {count_text(w['per_step'])} a step{outside}")
    lines += [
        "#",
        "# Inside the captured function a sync cannot be captured: move it out of the step,",
        "# or read the value every k steps (the GPU keeps it until then):",
        "if step % k == 0:",
        "    print(loss.item())",
    ]
    if not blocker:
        lines.insert(-5, "# (these lie outside the stretch a graph would hold: capture the rest, keep them after it)")
    return Snippet(
        "Your synchronizing calls (from the run without nsys)",
        "python",
        "Where the steps synchronize with the GPU, your own lines first; a library's line shows the line of yours "
        "that called it.",
        "\n".join(lines) + "\n",
    )


# What each of Inductor's reasons asks of the compiled function, as code, by the word
# launchprof.analysis.diagnosis.sources.skip_cause finds in it (the fix's text is there, SKIP_FIXES;
# the finished result holds each line's word: Shown.skip_causes).
_SKIP_CODE = (
    (
        "mutated input",
        [
            "# Return the new value; the caller keeps it (a CUDA Graph reads and writes fixed addresses):",
            "#   stats.mul_(0.9).add_(h.mean(0), alpha=0.1)        <- changes the argument in place",
            "#   return out, stats * 0.9 + h.mean(0) * 0.1           <- instead; outside:",
            "#   out, stats = compiled(x, stats); stats = stats.clone()",
        ],
    ),
    (
        "incompatible op",
        [
            "# Keep .item() / .tolist() / nonzero out of the compiled function:",
            "#   loss = compiled(x)              # a GPU tensor",
            "#   if step % k == 0: print(loss.item())",
        ],
    ),
    (
        "device",
        [
            "# Keep the compiled function on the GPU: inputs as CUDA tensors, .cpu() after the call:",
            "#   out = compiled(x.cuda(non_blocking=True)); host = out.cpu()",
        ],
    ),
)


def your_graph_skips(d: Diagnosis, causes: Sequence[str | None]) -> Snippet | None:
    """The lines where Inductor ran the user's compiled code without CUDA Graphs (the
    ``cudagraph-skip`` finding's ``where``, :func:`launchprof.analysis.diagnosis.sources.graph_skips`),
    each with its reason and, for the causes (``causes``, one per line:
    :attr:`~launchprof.analysis.result.Shown.skip_causes`) :data:`_SKIP_CODE` knows, the
    change as code naming the user's function; None without them.

    Raises:
        ValueError: ``causes`` has not one entry per line (the result was not finished
            from this diagnosis: a bug, never a user error).
    """
    finding = next((f for f in d.findings if f.kind == "cudagraph-skip" and f.where), None)
    if finding is None:
        return None
    if len(causes) != len(finding.where):
        raise ValueError(f"{len(causes)} skip causes for {len(finding.where)} lines of the cudagraph-skip finding")
    lines: list[str] = []
    for w, cause in zip(finding.where, causes, strict=True):
        at = one_line(f"{w['file']}:{w['line']} ({w['function']})")
        lines.append(f"# {at}: Inductor skipped CUDA Graphs due to {one_line(str(w['reason']))}")
        code = dict(_SKIP_CODE).get(cause or "")
        if code is not None:
            lines.append(f"# in {one_line(str(w['function']))}():")
            lines += code
        lines.append("#")
    lines.append('step = torch.compile(step, mode="reduce-overhead")  # then graphs are captured and replayed')
    return Snippet(
        "Your compiled code that ran without CUDA Graphs (from the run without nsys)",
        "python",
        "Inductor's reasons for not capturing, at the lines it names, and the change each asks for.",
        "\n".join(lines) + "\n",
    )


def choose(d: Diagnosis, r: Recommendation, skip_causes: Sequence[str | None]) -> list[Snippet]:
    """The snippets that fit: PyTorch or CUDA C++ by ``d.framework``; the user's own
    synchronizing lines first when the runs without nsys gave them (:func:`your_syncs`),
    and before them the lines where Inductor skipped CUDA Graphs (:func:`your_graph_skips`);
    the bucket pool for dynamic shapes; the update pattern for re-instantiation or changing
    parameters."""
    kinds = {f.kind for f in d.findings}
    if d.verdict == "no-gpu-work":
        return []
    if d.framework == "pytorch":
        out = [TORCH_GRAPH, TORCH_CALLABLES, TORCH_COMPILE]
        for mine in (your_syncs(d), your_graph_skips(d, skip_causes)):
            if mine is not None:
                out.insert(0, mine)
        if "dynamic-shapes" in kinds:  # after the user's own lines, before the generic recipes
            out.insert(out.index(TORCH_GRAPH) + 1, TORCH_BUCKETS)
        return out
    out = [CUDA_CAPTURE]
    if "reinstantiation" in kinds or "dynamic-shapes" in kinds or r.convert:
        out.append(CUDA_UPDATE)
    return out
