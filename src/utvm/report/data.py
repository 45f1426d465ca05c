"""The report as one JSON document: every figure the page shows, and the command that produces it.

`build_document` assembles the figures other commands already compute, never measuring anything again in
another way:

- `sources.size`: exactly what `utvm size MODEL --platform P --json` prints for the build (QEMU boards;
  none on the host, which has no firmware image to size);
- `sources.run`: exactly what `utvm run MODEL --platform P --profile --json --seed S` prints;
- `sources.metadata`: the model's metadata.json of `utvm compile` (its `main` function's sizes and the
  memory plan).

Everything else is read from those three (and from the compiled model they belong to): the flash split
(sums of `size`'s categories and objects), the RAM split (the plan's workspace and state blocks, `size`'s
.data + .bss and stack high-water mark), the per-layer rows (one per operator function, in execution order:
the profile's time, `utvm.ir.stats.node_macs` as `utvm info` counts MACs, the firmware's bytes per
operator from utvm.report.firmware, the schedule and its tuning-log gain from utvm.tune.budget's choice),
the memory timeline (the plan's buffers over the steps; the memory-aware planner's `memory.timeline` when
metadata.json has it) and the checks (`--check`, `--debug-layers`). Each section names its command under `command`, a
key of `commands`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from utvm.compiler import memory
from utvm.report.firmware import FirmwareBytes, node_index

#: The document's format: `format` names it, `version` grows when a key changes meaning (keys are only added).
FORMAT = "utvm-report"
VERSION = 1

#: Objects of `utvm size`'s `runtime` category that are the C library and the compiler's support library
#: (newlib's libc/libm, libgcc, libnosys): "startup/libc" on the page, with the application's startup code.
_C_LIBRARY = re.compile(r"^lib(c|c_nano|g|g_nano|m|m_nano|gcc|nosys|rdimon|stdc\+\+|supc\+\+)\.a\(")


def _bytes(cols: Mapping[str, int], *columns: str) -> int:
    return sum(int(cols.get(c, 0)) for c in columns)


def flash_split(size: Mapping[str, Any]) -> dict[str, Any]:
    """Flash (text + data: the load image) of `utvm size --json` output in four parts that add up to its
    totals: weights (the `constants` category), generated code (`operators`: kernels and the AOT main),
    runtime (the CRT and platform hooks: `runtime` less the C library) and startup/libc (`application`:
    main, board support, padding; plus the C library's objects)."""
    sizes = size["sizes"]
    libc = sum(_bytes(cols, "text", "data") for name, cols in size.get("objects", {}).items()
               if _C_LIBRARY.match(name))
    parts = [
        ("weights", "weights", _bytes(sizes["constants"], "text", "data"), "sizes.constants text + data"),
        ("code", "generated code", _bytes(sizes["operators"], "text", "data"), "sizes.operators text + data"),
        ("runtime", "runtime (CRT)", _bytes(sizes["runtime"], "text", "data") - libc,
         "sizes.runtime text + data, less the C library's objects"),
        ("startup_libc", "startup/libc", _bytes(sizes["application"], "text", "data") + libc,
         "sizes.application text + data, plus the C library's objects (libc, libm, libgcc)"),
    ]
    return {"total_bytes": _bytes(size["totals"], "text", "data"),
            "parts": [{"key": k, "label": label, "bytes": int(v), "from": src} for k, label, v, src in parts],
            "command": "size"}


def _plan(metadata: Mapping[str, Any], model: str) -> tuple[dict[str, Any], dict[str, Any]]:
    mem = metadata["modules"][model]["memory"]
    return mem, mem["plan"]


def _persistent_bytes(plan: Mapping[str, Any]) -> int:
    return sum(memory.extent(int(b["size"])) for b in plan["buffers"] if _kind(b) == "persistent")


def ram_split(metadata: Mapping[str, Any], model: str, size: Mapping[str, Any] | None) -> dict[str, Any]:
    """RAM: the workspace pool(s) less the state blocks (activations and scratch), the state blocks kept
    across runs (metadata.json's plan); on a QEMU board also the rest of the image's .data + .bss and the
    stack high-water mark of a run (`utvm size --json`)."""
    mem, plan = _plan(metadata, model)
    workspace = int(mem["functions"]["main"][0]["workspace_size_bytes"])
    persistent = _persistent_bytes(plan)
    parts = [("workspace", "workspace (activations, scratch)", workspace - persistent,
              "metadata.json: workspace_size_bytes less the state blocks", "compile"),
             ("persistent", "persistent state", persistent, "metadata.json: the plan's state blocks", "compile")]
    stack = None
    if size is not None:
        static = _bytes(size["totals"], "data", "bss")
        parts.append(("static", "other .data/.bss", static - workspace, "size: totals data + bss, less the workspace",
                      "size"))
        st = size["stack"]
        if st.get("measured_high_water") is not None:
            parts.append(("stack", "stack (measured high-water)", int(st["measured_high_water"]),
                          "size: stack.measured_high_water", "size"))
        stack = {"worst_case": st["worst_case"], "measured_high_water": st.get("measured_high_water"),
                 "consistent": st.get("consistent"), "path": list(st.get("path", [])), "command": "size"}
    return {"total_bytes": sum(int(p[2]) for p in parts),
            "parts": [{"key": k, "label": label, "bytes": int(v), "from": src, "command": cmd}
                      for k, label, v, src, cmd in parts],
            "stack": stack, "command": "size" if size is not None else "compile"}


def _kind(buffer: Mapping[str, Any]) -> str:
    first = str(buffer["tensors"][0]) if buffer["tensors"] else ""
    if first.startswith("scratch:"):
        return "scratch"
    if first.startswith("persistent:"):
        return "persistent"
    return "tensor"


def memory_section(metadata: Mapping[str, Any], model: str, operators: Sequence[Any]) -> dict[str, Any]:
    """The memory timeline: every buffer of the plan as a band over its live steps at its offset, the live
    bytes at each step (each buffer's extent, as the planner counts it: aligned to 16), their peak (the
    plan's lower bound), the workspace and the pools. With the memory-aware planner's `memory.timeline` in
    metadata.json, its per-step plans too (drawn side by side)."""
    mem, plan = _plan(metadata, model)
    # a step per operator function; a patch-based plan (utvm.compiler.patch) may call some more than once
    steps = max([len(operators)] + [int(b["live"][1]) + 1 for b in plan["buffers"]])
    pools = [{"name": p["name"], "base": int(p["base"]), "used_bytes": int(p["size_bytes"]),
              "capacity_bytes": int(p["capacity_bytes"]), "buffers": [int(i) for i in p["buffers"]]}
             for p in mem.get("pools", [])]
    pool_of = {i: p["name"] for p in pools for i in p["buffers"]}
    buffers = []
    for b in plan["buffers"]:
        kind = _kind(b)
        tensors = [str(t) for t in b["tensors"]]
        label = tensors[0].split(":", 1)[1] if kind != "tensor" else tensors[0]
        buffers.append({"id": int(b["id"]), "kind": kind, "label": label, "tensors": tensors, "bytes": int(b["size"]),
                        "extent_bytes": memory.extent(int(b["size"])), "offset": int(b["offset"]),
                        "live": [int(b["live"][0]), int(b["live"][1])], "pool": pool_of.get(int(b["id"]))})
    live = [sum(b["extent_bytes"] for b in buffers if b["live"][0] <= s <= b["live"][1]) for s in range(steps)]
    timeline = _timeline(mem["timeline"]) if isinstance(mem.get("timeline"), Mapping) else None
    ops = {op.name: op.op for op in operators}
    named = (timeline or {}).get("plan") or []
    if len(named) == steps:  # the plan's own steps, named by the timeline of metadata.json
        step_list = [{"step": s, "function": e["function"], "op": ops.get(e["function"], "")}
                     for s, e in enumerate(named)]
    else:
        step_list = [{"step": s, "function": op.name, "op": op.op} for s, op in enumerate(operators)]
        step_list += [{"step": s, "function": "", "op": ""} for s in range(len(step_list), steps)]
    aware = mem.get("memory_aware")
    return {
        "steps": step_list,
        "algorithm": plan["algorithm"], "optimal": bool(plan["optimal"]), "alignment": int(plan["alignment"]),
        "workspace_bytes": int(plan["workspace_bytes"]), "lower_bound_bytes": int(plan["lower_bound_bytes"]),
        "no_reuse_bytes": int(plan["no_reuse_bytes"]),
        "peak_bytes": int(mem.get("peak_bytes", max(live, default=0))),
        "live_peak_bytes": max(live, default=0),
        "layer_by_layer_bound_bytes": int(mem.get("layer_by_layer_bound_bytes", plan["lower_bound_bytes"])),
        "extra_macs": mem.get("extra_macs"),
        "persistent_bytes": _persistent_bytes(plan),
        "pools": pools, "buffers": buffers, "live_bytes": live,
        "timeline": timeline,
        "memory_aware": dict(aware) if isinstance(aware, Mapping) else None,
        "command": "compile",
    }


def _timeline(timeline: Mapping[str, Any]) -> dict[str, Any]:
    """Issue 21's `memory.timeline` ({plan name: [{step, function, live: [{buffer, bytes}], patch}]}) with
    each step's total live bytes."""
    out: dict[str, Any] = {}
    for name, entries in timeline.items():
        if not isinstance(entries, list):
            continue
        rows = []
        for e in entries:
            live = [{"buffer": x.get("buffer"), "bytes": int(x.get("bytes", 0))} for x in e.get("live", [])]
            rows.append({"step": int(e.get("step", len(rows))), "function": str(e.get("function", "")),
                         "live": live, "patch": e.get("patch"), "live_bytes": sum(x["bytes"] for x in live)})
        out[str(name)] = rows
    return out


def _macs(compiled: Any, op: Any) -> int | None:
    """The operator's multiply-accumulates as `utvm info` counts them (utvm.ir.stats.node_macs) on the node it
    computes; None when its node cannot be found."""
    from utvm.ir.stats import node_macs

    i = node_index(op.node)
    if i is None or not 0 <= i < len(compiled.graph.nodes) or compiled.graph.nodes[i].op != op.op:
        return None
    return node_macs(compiled.graph, i)


def _gains(choice: Any) -> dict[str, dict[str, Any]]:
    """Task -> {ratio, unit, count, description} of the tasks a tuning log's whole-model choice tuned."""
    if choice is None:
        return {}
    return {t.task: {"cost_ratio": t.ratio, "speedup": (1.0 / t.ratio) if t.ratio > 0 else None, "unit": choice.unit,
                     "default_cost": t.default.cost, "chosen_cost": t.chosen.cost}
            for t in choice.tasks if t.tuned}


def _source(op: Any, logged: Mapping[str, Mapping[str, Any]]) -> str:
    """Where an operator's schedule comes from: `default` (the kernel's default point), `tuning log` (the point
    the log's whole-model choice gave its task), `given` (another point the compiler gave the kernel: one with
    less scratch that keeps the workspace at the portable build's peak, or an MLF's log-tuned point), `none`
    (a kernel without choices)."""
    if op.schedule_source == "default":
        return "default"
    if op.schedule_source == "given":
        return "tuning log" if logged.get(op.task) == dict(op.schedule) else "given"
    return "none"


def layer_rows(compiled: Any, run: Mapping[str, Any], firmware: FirmwareBytes | None,
               choice: Any = None) -> list[dict[str, Any]]:
    """One row per operator function of `compiled`, in execution order."""
    profile = {p["function"]: p for p in run.get("profile") or []}
    gains = _gains(choice)
    logged = {k: dict(v) for k, v in choice.schedules.items()} if choice is not None else {}
    debug: dict[str, list[dict[str, Any]]] = {}
    for c in (run.get("debug_layers") or {}).get("layers", []):
        debug.setdefault(c["function"], []).append(c)
    rows = []
    for i, op in enumerate(compiled.operators):
        p = profile.get(op.name, {})
        macs = _macs(compiled, op)
        instructions = p.get("instructions")
        fw = firmware.operators.get(op.name) if firmware is not None else None
        source = _source(op, logged)
        gain = gains.get(op.task) if source == "tuning log" else None
        checks = debug.get(op.name)
        rows.append({
            "index": i, "function": op.name, "op": op.op, "node": op.node,
            "inputs": [t.to_json() for t in op.inputs], "outputs": [t.to_json() for t in op.outputs],
            "macs": macs,
            "weight_bytes": fw.weights if fw else None, "code_bytes": fw.code if fw else None,
            "shared_code": list(fw.shared_code) if fw else [], "shared_weights": list(fw.shared_weights) if fw else [],
            "seconds": p.get("seconds"), "instructions": instructions, "cycles_est": p.get("cycles_est"),
            "instructions_per_mac": (instructions / macs) if instructions is not None and macs else None,
            "task": op.task, "schedule": dict(op.schedule), "schedule_source": source, "tuning": gain,
            "scratch_bytes": op.scratch_bytes, "persistent_bytes": op.persistent_bytes, "inplace": op.inplace,
            "debug": None if checks is None else {"ok": all(c["ok"] for c in checks),
                                                  "n_diff": sum(int(c["n_diff"]) for c in checks),
                                                  "max_abs_diff": max(c["max_abs_diff"] for c in checks)},
        })
    return rows


def _sum(rows: Sequence[Mapping[str, Any]], key: str) -> int | float | None:
    values = [r[key] for r in rows if r[key] is not None]
    return sum(values) if values else None


def build_document(compiled: Any, platform: str, commands: Mapping[str, str], run: Mapping[str, Any], *,
                   size: Mapping[str, Any] | None = None, firmware: FirmwareBytes | None = None,
                   choice: Any = None, checked_by: str | None = None, check_ok: bool | None = None,
                   model_file: str = "", notes: Sequence[str] = ()) -> dict[str, Any]:
    """The report of `compiled` on `platform` (module docstring). `run`: what `utvm run --profile --json`
    printed for it; `size`: what `utvm size --json` printed (QEMU boards) and `firmware` the bytes of that
    firmware per operator; `choice`: the tuning log's whole-model choice (utvm.tune.budget.ModelChoice), if
    a log was applied; `checked_by` and `check_ok`: the oracle of `--check` and its verdict (evaluate.compare:
    int8 bit-exact, floats within the tolerance; `run --json` says it by its exit status); `commands`: the
    command lines, by name (compile, info, size, run, report)."""
    import utvm

    m = compiled.model_name
    metadata = compiled.metadata
    module = metadata["modules"][m]
    main = module["memory"]["functions"]["main"][0]
    extra = module.get("utvm", {})
    layers = layer_rows(compiled, run, firmware, choice)
    total_macs = _sum(layers, "macs")
    name = compiled.source_model_name or model_file
    kind = {".tflite": "tflite", ".onnx": "onnx"}.get(name[name.rfind("."):].lower() if "." in name else "", "")
    summary: dict[str, Any] = {
        "flash": flash_split(size) if size is not None else None,
        "flash_note": None if size is not None else (
            f"{platform} has no firmware image to size: utvm size measures the deploy firmware of a QEMU board"),
        "ram": ram_split(metadata, m, size),
        "macs": total_macs,
        "inference": {
            "latency_s": run.get("latency_s"), "instructions": run.get("instructions"),
            "cycles_est": run.get("cycles_est"), "timing_model": run.get("timing_model"), "command": "run",
            "deploy": None if size is None or size.get("instructions") is None else {
                "instructions": size.get("instructions"), "cycles_est": size.get("cycles_est"),
                "timing_model": size.get("timing_model"), "command": "size"},
        },
    }
    checks: dict[str, Any] = {"command": "run", "check": None, "debug_layers": None}
    if check_ok is not None:
        checks["check"] = {"oracle": checked_by, "ok": check_ok, "bit_exact": run.get("bit_exact"),
                           "max_abs_err": run.get("max_abs_err"), "seed": run.get("seed")}
    if run.get("debug_layers") is not None:
        dl = run["debug_layers"]
        checks["debug_layers"] = {"ok": dl["ok"], "operators": dl["operators"], "first_mismatch": dl["first_mismatch"]}
    return {
        "format": FORMAT, "version": VERSION, "utvm_version": utvm.__version__,
        "model": {"name": m, "file": name, "format": kind or "mlf", "hash": extra.get("model_hash"),
                  "inputs": [{"name": k, **v} for k, v in main["inputs"].items()],
                  "outputs": [{"name": k, **v} for k, v in main["outputs"].items()],
                  "operator_functions": len(compiled.operators), "macs": total_macs},
        "target": {"platform": platform, "target": compiled.options.target,
                   "convention": compiled.options.convention, "options": dict(extra.get("options", {})),
                   "timing_model": run.get("timing_model") or (size or {}).get("timing_model")},
        "commands": dict(commands),
        "summary": summary,
        "layers": layers,
        "layer_totals": {"macs": total_macs, "seconds": _sum(layers, "seconds"),
                         "instructions": _sum(layers, "instructions"), "cycles_est": _sum(layers, "cycles_est"),
                         "code_bytes": _sum(layers, "code_bytes"), "weight_bytes": _sum(layers, "weight_bytes"),
                         "command": "run"},
        "code": None if firmware is None else {
            "shared_code": [p.to_json() for p in firmware.shared_code],
            "shared_weights": [p.to_json() for p in firmware.shared_weights],
            "executor_code_bytes": firmware.executor_code, "other_code_bytes": firmware.other_code,
            "other_constant_bytes": firmware.other_constants, "command": "size"},
        "memory": memory_section(metadata, m, compiled.operators),
        "checks": checks,
        "notes": list(notes),
        "sources": {
            "size": None if size is None else dict(size),
            "run": dict(run),
            "metadata": {"workspace_size_bytes": main["workspace_size_bytes"],
                         "constants_size_bytes": main["constants_size_bytes"],
                         "io_size_bytes": main["io_size_bytes"]},
        },
    }
