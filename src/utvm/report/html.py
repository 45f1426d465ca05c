"""The report document (utvm.report.data) as one static HTML page.

The page is self-contained: inline CSS, inline SVG charts (utvm.report.svg), no script, no font, image or
style sheet from anywhere (a Content-Security-Policy of `default-src 'none'` says so to the browser), so it
opens from disk, offline, in any browser, and prints. It is drawn from the document alone, so everything it
shows is in `utvm report --json`; under each figure it names the command that produces it. Every text that
comes from the model or the machine (names, paths, messages) is escaped.

Sections: summary (model, target, flash and RAM splits, MACs, one inference), per layer (a bar chart of
time per operator function and a row per function), memory over time (the plan's buffers as bands over the
execution steps, with the live bytes, the peak, the layer-by-layer bound and the pool limits; both plans of
the memory-aware planner's timeline side by side when metadata.json has them), checks, and the commands.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from utvm.report.svg import (
    PALETTE,
    PERSISTENT_COLOUR,
    SCRATCH_COLOUR,
    TENSOR_COLOURS,
    Band,
    Level,
    Part,
    bar_chart,
    esc,
    fmt_bytes,
    fmt_count,
    fmt_seconds,
    gantt,
    stacked_bar,
    stacked_steps,
)

FLASH_COLOURS = {"weights": "#4e79a7", "code": "#f28e2b", "runtime": "#59a14f", "startup_libc": "#bab0ac"}
RAM_COLOURS = {"workspace": "#4e79a7", "persistent": PERSISTENT_COLOUR, "static": "#bab0ac", "stack": "#e15759"}

CSS = """
body{margin:0;background:#fff;color:#1f2933;font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,
'DejaVu Sans',sans-serif}
main{max-width:1140px;margin:0 auto;padding:18px 20px 40px}
h1{font-size:22px;margin:4px 0 2px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d9dee6;
padding-bottom:4px}h3{font-size:15px;margin:16px 0 6px}
.sub{color:#6b7785;margin:0 0 12px}
.facts{display:grid;grid-template-columns:repeat(auto-fill,minmax(260px,1fr));gap:2px 18px;margin:8px 0}
.facts div{white-space:nowrap;overflow:hidden;text-overflow:ellipsis}.facts b{color:#6b7785;font-weight:600}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:12px 0}
.card{border:1px solid #d9dee6;border-radius:6px;padding:8px 12px;min-width:150px}
.card .v{font-size:19px;font-weight:650}.card .k{color:#6b7785;font-size:12px}
.pair{display:flex;flex-wrap:wrap;gap:18px;align-items:flex-start}.pair>div{flex:1 1 520px}
.cmd{color:#6b7785;font-size:12px;margin:4px 0 10px}
code{font:12px/1.4 ui-monospace,'DejaVu Sans Mono',monospace;background:#eceff4;padding:1px 4px;border-radius:3px;
word-break:break-all}
table{border-collapse:collapse;width:100%;font-size:12.5px}
th{text-align:left;color:#6b7785;font-weight:600;border-bottom:1px solid #c5ccd6;padding:4px 6px;
vertical-align:bottom}
td{border-bottom:1px solid #edf0f4;padding:3px 6px;vertical-align:top}tr:nth-child(even) td{background:#fafbfc}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.io{font-size:11.5px;white-space:nowrap}td.sched{max-width:230px}td.sched code{font-size:11px;color:#3e4c59}
tr.total td{border-top:1px solid #c5ccd6;font-weight:600}
.shared{color:#b5541b;font-weight:600}
.ok{color:#2f7d32;font-weight:650}.bad{color:#c62828;font-weight:650}.muted{color:#6b7785}
svg.chart{display:block;max-width:100%;height:auto;margin:6px 0}
details{margin:6px 0}summary{color:#3e4c59}
footer{color:#6b7785;font-size:12px;margin-top:28px;border-top:1px solid #d9dee6;padding-top:8px}
"""


def _from(doc: Mapping[str, Any], key: str, what: str = "") -> str:
    cmd = doc["commands"].get(key)
    if not cmd:
        return ""
    lead = f"{esc(what)} from" if what else "from"
    return f'<p class="cmd">{lead} <code>{esc(cmd)}</code></p>'


def _card(value: str, key: str) -> str:
    return f'<div class="card"><div class="v">{value}</div><div class="k">{esc(key)}</div></div>'


def _shapes(ts: Sequence[Mapping[str, Any]]) -> str:
    return ", ".join(f"{esc(t['dtype'])}[{esc('x'.join(str(d) for d in t['shape']))}]" for t in ts) or "-"


def _summary(doc: Mapping[str, Any]) -> str:
    s = doc["summary"]
    model, target = doc["model"], doc["target"]
    inf = s["inference"]
    cards = []
    if s["flash"] is not None:
        cards.append(_card(fmt_bytes(s["flash"]["total_bytes"]), "flash (text + data)"))
    cards.append(_card(fmt_bytes(s["ram"]["total_bytes"]), "RAM" + (" incl. stack" if s["ram"]["stack"] else
                                                                     " (workspace)")))
    cards.append(_card(fmt_count(s["macs"]), "MACs per inference"))
    if inf.get("instructions") is not None:
        cards.append(_card(fmt_count(inf["instructions"]), "instructions per inference"))
    if inf.get("cycles_est") is not None:
        cards.append(_card(fmt_count(inf["cycles_est"]), f"estimated cycles ({esc(inf.get('timing_model') or '')})"))
    if inf.get("latency_s") is not None:
        cards.append(_card(fmt_seconds(inf["latency_s"]), "per inference (device timer)"))
    chk = doc["checks"]["check"]
    if chk is not None:
        cards.append(_card('<span class="ok">OK</span>' if chk["ok"] else '<span class="bad">MISMATCH</span>',
                           f"check against {chk.get('oracle') or 'the reference'}"))
    facts = [("model", model["name"]), ("file", model["file"] or "-"), ("format", model["format"]),
             ("model hash", model["hash"] or "-"), ("platform", target["platform"]), ("target", target["target"]),
             ("convention", target["convention"]), ("utvm", doc["utvm_version"]),
             ("operator functions", str(model["operator_functions"])),
             ("rounding", str(target["options"].get("rounding", "-"))),
             ("inputs", ", ".join(f"{i['name']} {i['dtype']}{i['shape']}" for i in model["inputs"])),
             ("outputs", ", ".join(f"{o['name']} {o['dtype']}{o['shape']}" for o in model["outputs"]))]
    out = ['<section id="summary"><h2>Summary</h2><div class="facts">']
    out += [f'<div title="{esc(v)}"><b>{esc(k)}</b> {esc(v, 90)}</div>' for k, v in facts]
    out.append("</div>")
    out.append('<div class="cards">' + "".join(cards) + "</div>")
    out.append('<div class="pair">')
    if s["flash"] is not None:
        parts = [Part(p["label"], p["bytes"], FLASH_COLOURS.get(p["key"], PALETTE[i % len(PALETTE)]),
                      fmt_bytes(p["bytes"]), f"{p['label']}: {fmt_bytes(p['bytes'])} ({p['from']})")
                 for i, p in enumerate(s["flash"]["parts"])]
        out.append("<div><h3>Flash</h3>" + stacked_bar("flash", parts, fmt_bytes(s["flash"]["total_bytes"]))
                   + _from(doc, "size") + "</div>")
    else:
        out.append(f'<div><h3>Flash</h3><p class="muted">{esc(s["flash_note"] or "not measured")}</p></div>')
    ram = s["ram"]
    parts = [Part(p["label"], p["bytes"], RAM_COLOURS.get(p["key"], PALETTE[i % len(PALETTE)]), fmt_bytes(p["bytes"]),
                  f"{p['label']}: {fmt_bytes(p['bytes'])} ({p['from']})") for i, p in enumerate(ram["parts"])]
    ram_html = "<div><h3>RAM</h3>" + stacked_bar("ram", parts, fmt_bytes(ram["total_bytes"]))
    ram_html += _from(doc, "compile", "workspace and state")
    if ram["stack"] is not None:
        st = ram["stack"]
        ram_html += (f'<p class="cmd">stack: static worst case {fmt_bytes(st["worst_case"])}, measured '
                     f'{fmt_bytes(st["measured_high_water"])}'
                     + ("" if st.get("consistent") in (None, True) else ' <span class="bad">(exceeds the bound)</span>')
                     + "</p>" + _from(doc, "size", ".data/.bss and stack"))
    else:
        ram_html += '<p class="cmd">stack and static RAM: measured on QEMU boards (utvm size)</p>'
    out.append(ram_html + "</div></div>")
    lines = []
    if inf.get("instructions") is not None:
        lines.append(f"{fmt_count(inf['instructions'])} instructions per inference (time evaluator, QEMU -icount)")
    if inf.get("cycles_est") is not None:
        lines.append(f"{fmt_count(inf['cycles_est'])} estimated cycles ({esc(inf.get('timing_model'))} timing model)")
    if inf.get("latency_s") is not None:
        lines.append(f"{fmt_seconds(inf['latency_s'])} per inference (device timer, median)")
    out.append("<h3>One inference</h3><p>" + "<br>".join(lines or ["not timed"]) + "</p>" + _from(doc, "run"))
    dep = inf.get("deploy")
    if dep is not None:
        out.append(f"<p>deploy firmware (no RPC): {fmt_count(dep['instructions'])} instructions, "
                   f"{fmt_count(dep['cycles_est'])} estimated cycles (timing plugin)</p>" + _from(doc, "size"))
    out.append(f'<p class="muted">{fmt_count(s["macs"])} MACs per inference</p>' + _from(doc, "info", "MACs"))
    out.append("</section>")
    return "\n".join(out)


def _layer_colour(op: str, seen: dict[str, str]) -> str:
    if op not in seen:
        seen[op] = PALETTE[len(seen) % len(PALETTE)]
    return seen[op]


def _function_cell(r: Mapping[str, Any], prefix: str) -> str:
    check = ""
    if r["debug"] is not None:
        tip = ("--debug-layers: equal to the reference" if r["debug"]["ok"]
               else f"--debug-layers: {r['debug']['n_diff']:,} elements differ")
        check = (f' <span class="ok" title="{tip}">\u2713</span>' if r["debug"]["ok"]
                 else f' <span class="bad" title="{tip}">\u2717</span>')
    name = r["function"].removeprefix(prefix)
    node = r["node"].split(" (", 1)[0]  # `node 3`: the whole label in the tooltip
    return (f'<span title="{esc(r["function"])}">{esc(name, 40)}</span>{check}<br>'
            f'<span class="muted" title="{esc(r["node"])}">{esc(r["op"])} \u00b7 {esc(node)}</span>')


def _bytes_cell(n: int | None, shared_names: Sequence[str], what: str, shared: Mapping[str, Any]) -> str:
    text = fmt_bytes(n)
    if shared_names:
        tips = []
        for name in shared_names:
            p = shared.get(name)
            tips.append(f"shared {what} {name}" + (f": {p['bytes']:,} B, used by {len(p['users'])} operator functions"
                                                    if p else ""))
        text += f' <span class="shared" title="{esc("; ".join(tips))}">+S</span>'
    return text


SOURCES = {"default": "the kernel's default point",
           "tuning log": "the point the tuning log's whole-model choice gave this task",
           "given": "a point the compiler gave the kernel (less scratch, to keep the workspace at its peak; or an "
                    "MLF's tuned point)",
           "none": "a kernel without schedule choices"}


def _schedule_cell(r: Mapping[str, Any]) -> str:
    source = f'<span title="{esc(SOURCES.get(r["schedule_source"], ""))}">{esc(r["schedule_source"])}</span>'
    t = r["tuning"]
    if t is not None and t.get("speedup"):
        source += f' <span class="muted">\u00d7{t["speedup"]:.2f} ({esc(t.get("unit") or "")})</span>'
    if not r["schedule"]:
        return source
    knobs = " ".join(f"{k}={v}" for k, v in r["schedule"].items())
    return f"<details><summary>{source}</summary><code>{esc(knobs)}</code></details>"


def _layers(doc: Mapping[str, Any]) -> str:
    layers = doc["layers"]
    by_instructions = any(r["instructions"] is not None for r in layers)
    colours: dict[str, str] = {}
    rows = []
    for r in layers:
        colour = _layer_colour(r["op"], colours)
        if by_instructions:
            value, shown = r["instructions"], fmt_count(r["instructions"])
        else:
            value, shown = r["seconds"], fmt_seconds(r["seconds"])
        rows.append(Part(f"{r['index']} {r['function'].removeprefix('tvmgen_' + doc['model']['name'] + '_')}",
                         value, colour, shown, f"{r['function']} ({r['op']}): {shown}"))
    axis = "instructions per call (QEMU -icount)" if by_instructions else "seconds per call (device timer)"
    out = ['<section id="layers"><h2>Per layer</h2>',
           f"<p>{len(layers)} operator functions in execution order; time of one call each, on the device.</p>",
           bar_chart("time", rows, axis), _from(doc, "run", "times")]
    code_info = doc["code"] or {}
    shared = {p["name"]: p for p in [*code_info.get("shared_code", []), *code_info.get("shared_weights", [])]}
    with_bytes = doc["code"] is not None
    with_est = any(r["cycles_est"] is not None for r in layers)
    prefix = f"tvmgen_{doc['model']['name']}_"
    columns: list[tuple[str, Any]] = [
        ("#", lambda r: (r["index"], "n")),
        ("function / op", lambda r: (_function_cell(r, prefix), "")),
        ("inputs \u2192 outputs", lambda r: (f"{_shapes(r['inputs'])} \u2192 {_shapes(r['outputs'])}", "io")),
        ("MACs", lambda r: (fmt_count(r["macs"]), "n")),
    ]
    if with_bytes:
        columns += [
            ("weights", lambda r: (_bytes_cell(r["weight_bytes"], r["shared_weights"], "constant", shared), "n")),
            ("code", lambda r: (_bytes_cell(r["code_bytes"], r["shared_code"], "kernel", shared), "n"))]
    if by_instructions:
        columns += [("instructions", lambda r: (fmt_count(r["instructions"]), "n"))]
        if with_est:
            columns += [("est. cycles", lambda r: (fmt_count(r["cycles_est"]), "n"))]
        columns += [("instr./MAC", lambda r: ("-" if r["instructions_per_mac"] is None
                                              else f"{r['instructions_per_mac']:.2f}", "n"))]
    else:
        columns += [("time", lambda r: (fmt_seconds(r["seconds"]), "n"))]
    columns += [("schedule", lambda r: (_schedule_cell(r), "sched"))]
    head = "<tr>" + "".join(f"<th>{esc(name)}</th>" for name, _cell in columns) + "</tr>"
    body = []
    for r in layers:
        cells = [cell(r) for _name, cell in columns]
        body.append(f'<tr class="layer" id="layer-{r["index"]}">'
                    + "".join(f'<td class="{cls}">{text}</td>' for text, cls in cells) + "</tr>")
    tot = doc["layer_totals"]
    totals = {"function / op": "<b>total</b>", "MACs": fmt_count(tot["macs"]),
              "weights": fmt_bytes(tot["weight_bytes"]), "code": fmt_bytes(tot["code_bytes"]),
              "instructions": fmt_count(tot["instructions"]),
              "est. cycles": fmt_count(tot["cycles_est"]), "time": fmt_seconds(tot["seconds"])}
    body.append('<tr class="total">' + "".join(f'<td class="n">{totals.get(name, "")}</td>' for name, _c in columns)
                + "</tr>")
    out.append(f"<table><thead>{head}</thead><tbody>{''.join(body)}</tbody></table>")
    out.append(_from(doc, "run", "time, instructions and estimated cycles")
               + _from(doc, "size", "weights and code (the deploy firmware's linker map)")
               + _from(doc, "info", "MACs") + _from(doc, "compile", "schedules (metadata.json operator_functions)"))
    code = doc["code"]
    if code is not None:
        items = [f"<li><code>{esc(p['name'])}</code>: {fmt_bytes(p['bytes'])}, used by {len(p['users'])} operator "
                 "functions</li>" for p in code["shared_code"]]
        items += [f"<li>constant <code>{esc(p['name'], 80)}</code>: {fmt_bytes(p['bytes'])}, read by "
                  f"{len(p['users'])} operator functions</li>" for p in code["shared_weights"]]
        items += [f"<li>executor (AOT main, entry point): {fmt_bytes(code['executor_code_bytes'])} of code</li>",
                  f"<li>other constants (strings, shape tables): {fmt_bytes(code['other_constant_bytes'])}</li>"]
        out.append("<h3>Shared kernels and the executor</h3><ul>" + "".join(items) + "</ul>")
    out.append("</section>")
    return "\n".join(out)


def _buffer_colours(mem: Mapping[str, Any]) -> dict[int, str]:
    """Buffer id -> its colour, the same in every memory chart: tensors in blues and greens, scratch orange,
    state purple."""
    return {b["id"]: {"scratch": SCRATCH_COLOUR, "persistent": PERSISTENT_COLOUR}.get(
        b["kind"], TENSOR_COLOURS[k % len(TENSOR_COLOURS)]) for k, b in enumerate(mem["buffers"])}


def _timeline_colour(buffer: object, colours: Mapping[int, str]) -> str:
    """A buffer of the memory-aware planner's timeline in its colour of the plan's chart (by id), else one of
    the palette's."""
    if isinstance(buffer, int) and not isinstance(buffer, bool):
        return colours.get(buffer, PALETTE[buffer % len(PALETTE)])
    return PALETTE[0]


def _bands(mem: Mapping[str, Any]) -> list[Band]:
    bands = []
    colours = _buffer_colours(mem)
    for b in mem["buffers"]:
        colour = colours[b["id"]]
        what = {"scratch": "scratch of", "persistent": "state of"}.get(b["kind"], "tensor")
        tip = (f"buffer {b['id']}: {what} {b['label']}, {b['bytes']:,} B at offset {b['offset']:,}, live steps "
               f"{b['live'][0]}-{b['live'][1]}" + (f", pool {b['pool']}" if b["pool"] else ""))
        bands.append(Band(b["label"], b["offset"], b["extent_bytes"], b["live"][0], b["live"][1], colour, tip))
    return bands


def _memory(doc: Mapping[str, Any]) -> str:
    mem = doc["memory"]
    tips = [f"step {s['step']}: {s['function']} ({s['op']})" for s in mem["steps"]]
    same = mem["layer_by_layer_bound_bytes"] == mem["live_peak_bytes"]
    levels = [Level("peak of live bytes" + (" = layer-by-layer bound" if same else ""), mem["live_peak_bytes"],
                    "#1f2933", dashed=False)]
    if not same:
        levels.append(Level("layer-by-layer bound", mem["layer_by_layer_bound_bytes"], "#c62828"))
    if mem["pools"]:
        for p in mem["pools"]:
            levels.append(Level(f"pool {p['name']} limit", p["base"] + p["capacity_bytes"], "#8e44ad"))
    else:
        levels.append(Level("workspace", mem["workspace_bytes"], "#c62828"))
    out = ['<section id="memory"><h2>Memory over time</h2>',
           f"<p>The {esc(mem['algorithm'])} plan{' (optimal)' if mem['optimal'] else ''}: workspace "
           f"{fmt_bytes(mem['workspace_bytes'])}, lower bound {fmt_bytes(mem['lower_bound_bytes'])} (the most bytes "
           f"live at one step, each buffer aligned to {mem['alignment']}), layer-by-layer bound "
           f"{fmt_bytes(mem['layer_by_layer_bound_bytes'])}, {fmt_bytes(mem['no_reuse_bytes'])} without reuse; "
           f"{len(mem['buffers'])} buffers (tensors, scratch, state"
           f"{', ' + fmt_bytes(mem['persistent_bytes']) + ' kept across runs' if mem['persistent_bytes'] else ''})."
           "</p>"]
    aware = mem.get("memory_aware") or {}
    if aware.get("stages") or aware.get("inplace_nodes"):
        out.append(f"<p>Memory-aware schedule: {len(aware.get('stages') or [])} patch stage(s), "
                   f"{len(aware.get('inplace_nodes') or [])} in-place depthwise layer(s), "
                   f"{fmt_count(aware.get('extra_calls'))} extra calls.</p>")
    if mem["extra_macs"]:
        out.append(f"<p>The plan computes {fmt_count(mem['extra_macs'])} extra MACs (recomputed halos) for a peak of "
                   f"{fmt_bytes(mem['peak_bytes'])} against the layer-by-layer bound "
                   f"{fmt_bytes(mem['layer_by_layer_bound_bytes'])}.</p>")
    title = "workspace offset (bytes) of each buffer over the execution steps; line: live bytes"
    out.append(gantt("memory", _bands(mem), mem["live_bytes"], levels, tips, title))
    timeline = mem.get("timeline")
    if timeline:
        out.append("<h3>Both plans, live bytes per step</h3><div class=\"pair\">")
        vmax = max([r["live_bytes"] for rows in timeline.values() for r in rows] + [1]) * 1.08
        colours = _buffer_colours(mem)
        for name, rows in timeline.items():
            cols = [[(f"buffer {x['buffer']}", x["bytes"], _timeline_colour(x["buffer"], colours)) for x in r["live"]]
                    for r in rows]
            peak = max([r["live_bytes"] for r in rows] + [0])
            lv = [Level("peak", peak, "#1f2933", dashed=False),
                  Level("layer-by-layer bound", mem["layer_by_layer_bound_bytes"], "#c62828")]
            step_tips = [f"step {r['step']}: {r['function']}" + (f", patch {r['patch']}" if r["patch"] else "")
                         for r in rows]
            out.append("<div>" + stacked_steps(f"timeline-{name}", cols, lv, step_tips, f"{name}: live bytes",
                                               vmax=vmax) + "</div>")
        out.append("</div>")
    out.append(_from(doc, "compile", "the plan (metadata.json memory.plan)"))
    rows = "".join(
        f"<tr><td class=\"n\">{b['id']}</td><td>{esc(b['kind'])}</td><td title=\"{esc(', '.join(b['tensors']))}\">"
        f"{esc(b['label'], 70)}</td><td class=\"n\">{fmt_bytes(b['bytes'])}</td><td class=\"n\">{b['offset']:,}</td>"
        f"<td class=\"n\">{b['live'][0]}\u2013{b['live'][1]}</td><td>{esc(b['pool'] or '')}</td></tr>"
        for b in mem["buffers"])
    out.append(f"<details><summary>{len(mem['buffers'])} buffers</summary><table><thead><tr><th>id</th><th>kind</th>"
               "<th>tensor / function</th><th>bytes</th><th>offset</th><th>live steps</th><th>pool</th></tr></thead>"
               f"<tbody>{rows}</tbody></table></details>")
    out.append("</section>")
    return "\n".join(out)


def _num(x: float | None) -> str:
    """A difference as the page writes it (None: not finite, as strict JSON carries it)."""
    return "not finite" if x is None else f"{x:.3g}"


def _checks(doc: Mapping[str, Any]) -> str:
    c = doc["checks"]
    out = ['<section id="checks"><h2>Checks</h2>']
    chk = c["check"]
    if chk is None:
        out.append('<p class="muted">The outputs were not compared with a reference (add <code>--check</code>).</p>')
    else:
        verdict = '<span class="ok">OK</span>' if chk["ok"] else '<span class="bad">MISMATCH</span>'
        exact = "bit-exact" if chk["bit_exact"] else f"max abs error {_num(chk['max_abs_err'])}"
        out.append(f"<p>Outputs against {esc(chk['oracle'] or 'the reference')}: {verdict} ({esc(exact)}), "
                   f"inputs from seed {esc(chk['seed'])}.</p>")
    dl = c["debug_layers"]
    if dl is None:
        out.append('<p class="muted">Intermediate tensors were not compared (add <code>--debug-layers</code>).</p>')
    elif dl["ok"]:
        out.append(f'<p>Every intermediate tensor of the {dl["operators"]} operator functions equals utvm\'s reference '
                   'interpreter\'s: <span class="ok">OK</span>.</p>')
    else:
        f = dl["first_mismatch"]
        out.append(f'<p><span class="bad">First layer that differs</span>: #{f["index"]} '
                   f"<code>{esc(f['function'])}</code> ({esc(f['op'])}, {esc(f['node'], 120)}), tensor "
                   f"<code>{esc(f['tensor'], 80)}</code>: "
                   f"{f['n_diff']:,} elements differ, max abs difference {_num(f['max_abs_diff'])}, first at "
                   f"{esc(f['first_diff'])}.</p>")
    out.append(_from(doc, "run"))
    for note in doc.get("notes", []):
        out.append(f'<p class="bad">{esc(note)}</p>')
    out.append("</section>")
    return "\n".join(out)


def _commands(doc: Mapping[str, Any]) -> str:
    what = {"report": "this page (--json: its data)", "compile": "metadata.json: memory plan, schedules",
            "info": "MACs", "size": "flash, static RAM, stack, per-layer bytes, deploy instructions",
            "run": "latency, instructions, per-layer time, checks"}
    items = "".join(f"<li>{esc(what.get(k, k))}: <code>{esc(v)}</code></li>" for k, v in doc["commands"].items() if v)
    return f'<section id="commands"><h2>Commands</h2><ul>{items}</ul></section>'


def render(doc: Mapping[str, Any]) -> str:
    """The page of the report document `doc` (utvm.report.data.build_document)."""
    model, target = doc["model"], doc["target"]
    title = f"utvm report: {model['file'] or model['name']} on {target['platform']}"
    head = (f"<h1>{esc(title)}</h1><p class=\"sub\">model {esc(model['name'])} \u2014 {esc(target['target'])}, "
            f"{esc(target['convention'])} convention, utvm {esc(doc['utvm_version'])}</p>")
    body = [head, _summary(doc), _layers(doc), _memory(doc), _checks(doc), _commands(doc),
            f"<footer>Generated by utvm {esc(doc['utvm_version'])}. Every figure on this page is in "
            f"<code>{esc(doc['commands'].get('report', 'utvm report'))} --json</code>.</footer>"]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{esc(title)}</title><style>{CSS}</style></head>\n<body><main>\n" + "\n".join(body)
            + "\n</main></body></html>\n")
