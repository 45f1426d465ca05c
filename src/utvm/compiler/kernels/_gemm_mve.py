"""int8 convolution and dense as a Helium (MVE) GEMM: `algo = mve` on Armv8.1-M MVE vocabularies (`ctx.isa.mve`).

VMLADAVA multiplies 16 int8 pairs and adds all 16 products to a 32-bit accumulator in one instruction, so the
reduction is walked in blocks of 16 raw int8 values: no widening and no offset in the loop. The input offset is
folded into the initial accumulator at compile time, acc = sum x * w + (bias - input_zp * sum w): padding taps
hold x = input_zp (they add zp * w, which the fold takes back, as TFLite skips them) and the reduction's padding
up to a multiple of 16 holds zero weights against zero (or zero-predicated) inputs. VMLADAVA and the vector adds
wrap modulo 2^32 (Armv8.1-M truncates the sum to 32 bits), so the folded sum is exact whenever the true
accumulator fits int32, which `conv.accumulator_bound` proves: no partial sum needs a bound of its own.

A register block of `oc_block` channels x `px_block` pixels keeps one scalar accumulator per output (VMLADAVA
accumulates into an even core register: at most 8 live); per block of 16 it loads each pixel's input vector and
each channel's weight vector once. Outputs leave four at a time: a vector of four accumulators (`isa.lanes4`) gets
its initial values, the vector requantization (requant.mve_requant_right_helper when every shift is a right shift,
else requant.mve_requant_helper), the output zero point and the clamp, and a narrowing byte store. With `oc_block`
>= 4 a vector is four consecutive channels of one pixel (a contiguous 4-byte store); with `oc_block` = 2 it is two
channels of two pixels (a scatter store at offsets 0, 1, d, d + 1 from the pair's first output, d the distance of
the second pixel's). Per-channel tables (initial accumulators, per-channel requantization operands) are laid out
in that lane order (`lane_order`), interleaved (`epilogue_table`). Channels are padded to a multiple of the lane
group (zero weights; their lanes are never stored: the last block's stores are predicated) and a last block of
pixels shorter than `px_block` repeats its last pixel (those lanes store the same bytes to the same place again).

Columns (`cols`): `copy` copies each pixel's window (raw int8, padding taps = the input zero point, the
reduction padded with zeros to a multiple of 16) into scratch (im2col, 16 bytes per vector load/store);
`inplace` (a 1x1 window without padding, and dense) reads a pixel's channels where they are, the last partial
block of 16 by a zero-predicated load; `window` (channels a multiple of 16) reads a block of pixels' window rows
in place when they lie inside the input, else tap by tap through tables of pointers (a padding tap reads a
constant row of the zero point): no scratch. Knobs: `px_block`, `oc_block` (shared with the SMLAD GEMM; the
legal pairs are `MVE_BLOCKS`), `kb_unroll` (blocks of 16 per loop iteration), `k_loop` (C intrinsics or one asm
statement per reduction), `no_sched`, `cols`. Ideas: CMSIS-NN's
arm_nn_mat_mult_nt_t_s8 (MVE: VMLADAVA over rows, kernel sums folded into the bias); written here
(docs/kernels.md, "Helium (MVE)").
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from utvm.compiler.kernels import KernelCode, KernelContext
from utvm.compiler.kernels._gemm import GemmLayer, GemmShape, Window
from utvm.compiler.kernels.cemit import block, for_loop, indent, lines
from utvm.compiler.kernels.isa import PortableC
from utvm.compiler.kernels.requant import OutputStage, mve_reason, mve_requant_helper, mve_requant_right_helper
from utvm.compiler.schedule import Knob, Schedule, no_sched_knob

#: (px_block, oc_block) register blocks: whole vectors of four outputs, at most 8 accumulators
MVE_BLOCKS = ((1, 4), (2, 4), (1, 8), (2, 2), (4, 2))
#: accumulators an asm reduction may hold (VMLADAVA's even registers, beside the pointers and a loop counter)
MAX_ASM_ACCUMULATORS = 4


def lane_group(ob: int) -> int:
    """Channels one output vector holds: 4 for blocks of >= 4 channels, 2 (of two pixels) for blocks of 2."""
    return 4 if ob >= 4 else 2


def kp16(k: int) -> int:
    """The reduction length padded to whole blocks of 16."""
    return -(-k // 16) * 16


# --- the space ------------------------------------------------------------------------------------------------

def mve_knobs(k: int, inplace_ok: bool, window_ok: bool = False) -> tuple[Knob, ...]:
    """The MVE GEMM's own knobs for a reduction of length k (`px_block`, `oc_block`: the GEMM's); `inplace_ok`:
    a 1x1 window that never pads (or dense), `window_ok`: channels a multiple of 16 (`window_cols`)."""
    kq = kp16(k) // 16
    unrolls = tuple(u for u in (1, 2, 4, 8) if u <= max(kq - 1, 1))
    return (Knob("kb_unroll", unrolls, "blocks of 16 reduction values per loop iteration"), no_sched_knob(),
            Knob("k_loop", ("c", "asm"), "the reduction's whole blocks of 16 as C intrinsics or one asm statement "
                 "(post-increment loads, its own loop counter; up to 4 accumulators)"),
            Knob("cols", ("copy", *(("inplace",) if inplace_ok else ()), *(("window",) if window_ok else ())),
                 "each pixel's inputs copied into a column in scratch (im2col), or read in place: the channels of "
                 "a 1x1 window that never pads, or a window's rows and taps (channels a multiple of 16)"))


#: `cols = window`: the most taps a window may have (a block's pixels keep a table of tap pointers on the stack)
MAX_WINDOW_TAPS = 49


def window_cols(win: Window) -> bool:
    """Whether `cols = window` applies: every tap's channels are whole blocks of 16, and the window's tap table
    stays small (`MAX_WINDOW_TAPS`)."""
    return win.c % 16 == 0 and win.kh * win.kw <= MAX_WINDOW_TAPS


def requant_reason(stage: OutputStage) -> str | None:
    """Why the MVE requantization is not exact for this output stage (None when it is)."""
    return mve_reason(stage.rounding, stage.multiplier, stage.shift, stage.bound)


def mve_legal(p: Schedule, max_px: int, stage: OutputStage) -> str | None:
    """Why a point of the MVE GEMM is not legal here (None when it is)."""
    if (p["px_block"], p["oc_block"]) not in MVE_BLOCKS:
        return (f"a {p['px_block']} x {p['oc_block']} block is not one of the MVE blocks "
                f"{', '.join(f'{a}x{b}' for a, b in MVE_BLOCKS)}")
    if p["px_block"] > max(max_px, 1):
        return f"px_block {p['px_block']} > the {max_px} output pixels"
    if p["cols"] == "window" and p["k_loop"] != "asm":
        return "cols window: its rows and taps are read by the asm reduction (k_loop asm)"
    if p["k_loop"] == "asm" and p["px_block"] * p["oc_block"] > MAX_ASM_ACCUMULATORS:
        return (f"k_loop asm: {p['px_block'] * p['oc_block']} accumulators (GCC cannot always give the asm "
                f"more than {MAX_ASM_ACCUMULATORS} even registers beside its pointers)")
    reason = requant_reason(stage)
    return f"MVE requantization: {reason}" if reason else None


def mve_scratch(p: Schedule, k: int) -> int:
    """Bytes of scratch an MVE GEMM point asks for: a block's int8 columns (`cols = copy`), else none."""
    return p["px_block"] * kp16(k) if p["cols"] == "copy" else 0


def mve_cost(shape: GemmShape, p: Schedule) -> float:
    """Estimated instructions of one call of an MVE GEMM point (a static model for fit.lower_within): per block
    of 16 reduction values, a vector load per pixel and per channel and a VMLADAVA per pair; the im2col copy;
    four per output for the vector requantization and store."""
    px, ob = p["px_block"], p["oc_block"]
    kq = kp16(shape.win.k) // 16
    blocks = -(-shape.m // px) * -(-shape.n // ob)
    per_block = kq * (px + ob + px * ob) + (kq if p["k_loop"] == "c" else 2 * kq // max(1, p["kb_unroll"]))
    copy = shape.m * (2 * kq + 2 * shape.win.kh * shape.win.kw) if p["cols"] == "copy" else 0
    return float(shape.batch * (blocks * (per_block + 4 * ob) + copy + 4 * shape.m * shape.n))


def mve_default(k: int, max_px: int, inplace_ok: bool, window_ok: bool = False) -> Schedule:
    """The heuristic point (measured on the shared models): 2 pixels x 2 channels where there are pixels (1 x 4
    for one pixel, as a dense row), the reduction in asm unrolled up to 8 blocks of 16, inputs read in place
    where they can be (no scratch: the workspace is the portable build's)."""
    kq = kp16(k) // 16
    px, ob = (2, 2) if max_px >= 2 else (1, 4)
    unroll = max(u for u in (1, 2, 4, 8) if u <= max(kq - 1, 1))
    return {"px_block": px, "oc_block": ob, "kb_unroll": unroll, "no_sched": True, "k_loop": "asm",
            "cols": "inplace" if inplace_ok else ("window" if window_ok else "copy")}


# --- tables ---------------------------------------------------------------------------------------------------

def pack_weights(w: np.ndarray, ob: int) -> np.ndarray:
    """(n, k) int8 weights -> the table the GEMM walks with one pointer: rows padded with zeros to a multiple of
    16 values and to a multiple of the lane group channels, in blocks of `ob` channels (the last block holds the
    rest), block-of-16 major inside a block: the 16 weights of block b of channel i follow those of channel i - 1."""
    n, k = w.shape
    lane = lane_group(ob)
    n_r = -(-n // lane) * lane
    kp = kp16(k)
    padded = np.zeros((n_r, kp), np.int8)
    padded[:n, :k] = w
    blocks = [padded[o:o + ob].reshape(-1, kp // 16, 16).transpose(1, 0, 2).reshape(-1) for o in range(0, n_r, ob)]
    return np.concatenate(blocks)


def lane_order(values: np.ndarray | list[int], ob: int) -> np.ndarray:
    """Per-channel values in the order an output vector's lanes read them: padded with zeros to a multiple of
    the lane group; for 2-channel blocks each pair twice (lanes c, c + 1, c, c + 1), at index 2 * c."""
    lane = lane_group(ob)
    v = np.asarray(values, np.int64).reshape(-1)
    v = np.concatenate([v, np.zeros(-len(v) % lane, np.int64)])
    if lane == 2:
        v = np.repeat(v.reshape(-1, 1, 2), 2, axis=1).reshape(-1)
    return v


def epilogue_table(columns: list[np.ndarray] | list[list[int]], ob: int) -> np.ndarray:
    """Per-channel columns (the initial accumulators, then any per-channel requantization operands) in lane order
    (`lane_order`), interleaved by groups of four lanes: group g's four values of column 0, of column 1, ... so
    one pointer reads a vector's operands from consecutive words."""
    ordered = np.stack([lane_order(c, ob) for c in columns])  # (columns, lanes)
    return ordered.reshape(len(columns), -1, 4).transpose(1, 0, 2).reshape(-1)


def folded_init(weights: np.ndarray, bias: np.ndarray | None, input_zp: int) -> np.ndarray:
    """bias - input_zp * sum w per output channel, modulo 2^32 as an int32 (the sum it starts wraps the same)."""
    w = weights.astype(np.int64)
    b = np.zeros(w.shape[0], np.int64) if bias is None else bias.astype(np.int64).reshape(-1)
    return ((b - input_zp * w.sum(axis=1) + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def const_table(ctx: KernelContext, ctype: str, values: np.ndarray | list[int], hint: str) -> str:
    """`ctx.table`, its bytes counted as the model's constants (the weights the packed tables replace)."""
    arr = np.asarray(values)
    ctx.file.constant_bytes += int(arr.size) * {"int8_t": 1, "int32_t": 4}[ctype]
    return ctx.table(ctype, arr, hint)


# --- im2col -----------------------------------------------------------------------------------------------------

def im2col(v: PortableC, win: Window, oh: int, ow: int, src: str, col: str) -> str:
    """C filling the int8 column `col` of the output pixel whose window origin is (iy0, ix0) from the batch's
    input `src`: raw values, `zpv` (the input zero point in every byte lane) for taps outside the input. The
    column's tail beyond k is left alone (zeroed once, before the pixels)."""
    c, kw, kh = win.c, win.kw, win.kh
    rows_in, cols_in = win.always_inside(oh, ow)
    row_bytes = kw * c
    copy_tap = v.copy_bytes(f"cr + kx * {c}", f"xrow + ix * {c}", c)
    tap = copy_tap if cols_in else (block(f"if (ix < 0 || ix >= {win.w})", v.fill_bytes(f"cr + kx * {c}", "zpv", c))
                                    + " else " + block("", copy_tap))
    taps = for_loop("kx", 0, kw, [f"const int32_t ix = ix0 + kx * {win.dw};", tap])
    if win.dw == 1:  # a window row is kw * c contiguous bytes when it lies inside the input
        whole = v.copy_bytes("cr", f"xrow + ix0 * {c}", row_bytes)
        taps = whole if cols_in else (block(f"if (ix0 >= 0 && ix0 + {kw - 1} < {win.w})", whole) + " else "
                                      + block("", taps))
    row_ok = [f"const int8_t* const xrow = {src} + iy * {win.w * c};", taps]
    row = [f"const int32_t iy = iy0 + ky * {win.dh};", f"int8_t* const cr = {col} + ky * {row_bytes};"]
    if rows_in:
        row += row_ok
    else:
        row.append(block(f"if (iy < 0 || iy >= {win.h})", v.fill_bytes("cr", "zpv", row_bytes)) + " else "
                   + block("", row_ok))
    return for_loop("ky", 0, kh, row)


# --- the channel blocks -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MveBlock:
    """Every channel of `px` pixels whose inputs start at xp0.. and whose output rows start at y0..: `n` channels
    (padded to a multiple of the lane group), `oc_block` at a time, over `kq` blocks of 16 (`tail_pred`: the
    predicate of an in-place input's last, partial block; None when every block is whole or zero-padded)."""

    v: PortableC
    n: int
    ob: int
    px: int
    kq: int
    unroll: int
    w_table: str
    #: per group of four lanes: the initial accumulators, then (per-channel requantization) each operand's four
    #: values (`epilogue_table`)
    ep_table: str
    rq_fn: str
    #: per-tensor requantization: the operands' int32x4_t locals; per-channel: () (they are in `ep_table`)
    rq_locals: tuple[str, ...]
    rq_width: int
    zp: int
    lo: int
    hi: int
    tail_pred: str | None
    #: the whole blocks of 16 as one asm statement with its own loop (`k_loop = asm`), else C intrinsics
    k_asm: bool = False
    #: `cols = window`, a block of pixels whose windows lie inside the input: (window rows, blocks of 16 per
    #: row, bytes from a row's end to the next row's start); the rows are read in place from xp0..
    rows: tuple[int, int, int] | None = None
    #: `cols = window`, any block: (taps, blocks of 16 per tap); tap t of pixel j is read from tp<j>[t] (the
    #: input, or a row of the input zero point for a tap in the padding)
    taps: tuple[int, int] | None = None

    @property
    def lane(self) -> int:
        return lane_group(self.ob)

    @property
    def n_r(self) -> int:
        return -(-self.n // self.lane) * self.lane

    def all_channels(self) -> str:
        """The channel blocks: the uniform ones in a loop, a narrower or partly padded last one peeled."""
        blocks = [(o, min(self.ob, self.n_r - o)) for o in range(0, self.n_r, self.ob)]
        peel = 1 if blocks[-1][1] != self.ob or self.n % self.lane else 0
        loop = blocks[:len(blocks) - peel]
        out = [f"const int8_t* wq = {self.w_table};"]
        if len(loop) == 1:
            out.append(block("", ["const int32_t oc = 0;", self._channels(self.ob, False)]))
        elif loop:
            out.append(block(f"for (int32_t oc = 0; oc < {len(loop) * self.ob}; oc += {self.ob})",
                             self._channels(self.ob, False)))
        if peel:
            o, width = blocks[-1]
            out.append(block("", [f"const int32_t oc = {o};", self._channels(width, self.n % self.lane != 0)]))
        out.append("(void)wq;")
        return lines(out)

    def _step(self, ob: int, kb: int, first: bool, pred: str | None) -> str:
        """The block of 16 `kb` blocks past the pointers: the loads and VMLADAV(A)s of every output."""
        out = []
        for j in range(self.px):
            load = f"vldrbq_z_s8(xq{j} + {16 * kb}, {pred})" if pred else f"vldrbq_s8(xq{j} + {16 * kb})"
            out.append(f"const int8x16_t x{j} = {load};")
        for i in range(ob):
            out.append(f"const int8x16_t w{i} = vldrbq_s8(wq + {16 * (kb * ob + i)});")
            for j in range(self.px):
                a = f"a{i}_{j}"
                out.append(f"{a} = vmladavq_s8(x{j}, w{i});" if first else f"{a} = vmladavaq_s8({a}, x{j}, w{i});")
        return block("", out)

    def _advance(self, ob: int, blocks: int) -> list[str]:
        return [f"xq{j} += {16 * blocks};" for j in range(self.px)] + [f"wq += {16 * blocks * ob};"]

    def _channels(self, ob: int, padded: bool) -> str:
        """One block of `ob` channels from `oc` (`padded`: its last channels are padding; stores predicated)."""
        px, kq = self.px, self.kq
        if self.taps is not None:
            return lines([f"int32_t a{i}_{j};" for i in range(ob) for j in range(px)], self._asm_taps(ob),
                         self._epilogue(ob, padded))
        out = [f"const int8_t* xq{j} = xp{j};" for j in range(px)]
        # the same inputs for every block: opaque pointers, so GCC addresses them from one register each
        # instead of keeping (and spilling) every block's addresses across the channel loop
        out += [f"{self.v.local('TVM_OPAQUE_PTR')}(xq{j});" for j in range(px)]
        out += [f"int32_t a{i}_{j};" for i in range(ob) for j in range(px)]
        whole = kq - (1 if self.tail_pred is not None else 0)
        if self.rows is not None:
            return lines(out, self._asm_rows(ob), [f"(void)xq{j};" for j in range(px)], self._epilogue(ob, padded))
        if self.k_asm and whole:
            out.append(self._asm_blocks(ob, whole))
            if self.tail_pred is not None:
                out += [self._step(ob, 0, False, self.tail_pred), *self._advance(ob, 1)]
            out += [f"(void)xq{j};" for j in range(px)]
            out.append(self._epilogue(ob, padded))
            return lines(out)
        last_pred = self.tail_pred is not None and kq > 1
        middle = kq - 1 - (1 if last_pred else 0)  # the blocks between the first and a predicated last one
        out += [self._step(ob, 0, True, self.tail_pred if kq == 1 else None), *self._advance(ob, 1)]
        if middle:
            u = min(self.unroll, middle)
            loops, rest = divmod(middle, u)
            body = [*(self._step(ob, t, False, None) for t in range(u)), *self._advance(ob, u)]
            out += body if loops == 1 else [block(f"for (int32_t q = {loops}; q > 0; --q)", body)]
            if rest:
                out += [*(self._step(ob, t, False, None) for t in range(rest)), *self._advance(ob, rest)]
        if last_pred:
            out += [self._step(ob, 0, False, self.tail_pred), *self._advance(ob, 1)]
        out += [f"(void)xq{j};" for j in range(px)]
        out.append(self._epilogue(ob, padded))
        return lines(out)

    def _kblock(self, ob: int, first: bool) -> list[str]:
        """One block of 16 in asm: each pixel's input vector and each channel's weight vector loaded once with
        post-increment (the pointers advance), VMLADAV (`first`: the accumulators start) or VMLADAVA."""
        ins = [f"vldrb.u8 %q[x{j}], [%[xq{j}]], #16" for j in range(self.px)]
        for i in range(ob):
            w = f"w{i % 2}"
            ins.append(f"vldrb.u8 %q[{w}], [%[wq]], #16")
            ins += [f"{'vmladav.s8' if first else 'vmladava.s8'} %[a{i}_{j}], %q[x{j}], %q[{w}]"
                    for j in range(self.px)]
        return ins

    def _asm(self, ob: int, ins: list[str], fresh: bool, loops: int | None) -> str:
        """One asm statement of the instructions `ins` (`fresh`: they start the accumulators; `loops`: the count
        of its SUBS/BNE loop, a register of its own). The accumulators are in even registers ("Te", what
        VMLADAVA takes); no core register is tied to a low-overhead loop."""
        px = self.px
        acc = "=&Te" if fresh else "+Te"
        outs = ([f'[a{i}_{j}] "{acc}"(a{i}_{j})' for i in range(ob) for j in range(px)]
                + [f'[xq{j}] "+r"(xq{j})' for j in range(px)] + ['[wq] "+r"(wq)']
                + [f'[x{j}] "=&w"(x{j})' for j in range(px)] + ['[w0] "=&w"(w0)', '[w1] "=&w"(w1)'])
        decl = [f"int8x16_t {', '.join([*(f'x{j}' for j in range(px)), 'w0', 'w1'])};"]
        if loops is not None:
            decl.append(f"int32_t n = {loops};")
            outs.append('[n] "+r"(n)')
        text = "\n".join(f'"{x}\\n\\t"' for x in ins[:-1]) + f'\n"{ins[-1]}"'
        return block("", [*decl, "__asm__(" + indent(text, 4).lstrip(),
                          "        : " + ",\n          ".join(outs),
                          "        :",
                          '        : "memory", "cc");  /* reads the columns: never moved across their stores */'])

    def _asm_blocks(self, ob: int, whole: int) -> str:
        """The first `whole` blocks of 16 of contiguous inputs as one asm statement: the first block starts the
        accumulators, the rest run in a loop of `unroll` blocks."""
        u = min(self.unroll, max(whole - 1, 1))
        loops, rest = divmod(whole - 1, u)
        ins = self._kblock(ob, True)
        if loops > 1:
            ins += ["1:", *(x for _ in range(u) for x in self._kblock(ob, False)), "subs %[n], %[n], #1", "bne 1b"]
        elif loops == 1:
            ins += [x for _ in range(u) for x in self._kblock(ob, False)]
        ins += [x for _ in range(rest) for x in self._kblock(ob, False)]
        return self._asm(ob, ins, True, loops if loops > 1 else None)

    def _asm_rows(self, ob: int) -> str:
        """The window rows of pixels inside the input, read in place: each row's blocks of 16, then every pointer
        skips to the next row (ADDW); the rows after the first in a loop."""
        assert self.rows is not None
        kh, row_kb, skip = self.rows

        def row(first: bool) -> list[str]:
            ins = [x for b in range(row_kb) for x in self._kblock(ob, first and b == 0)]
            return ins + ([f"addw %[xq{j}], %[xq{j}], #{skip}" for j in range(self.px)] if skip else [])

        ins = row(True)
        if kh > 2:
            ins += ["1:", *row(False), "subs %[n], %[n], #1", "bne 1b"]
        elif kh == 2:
            ins += row(False)
        return self._asm(ob, ins, True, kh - 1 if kh > 2 else None)

    def _asm_taps(self, ob: int) -> str:
        """Tap by tap (each tap's channels contiguous, or a row of the input zero point in the padding): the
        pointers taken from the pixels' tap tables, one asm statement per tap."""
        assert self.taps is not None
        taps, tap_kb = self.taps
        px = self.px

        def tap(first: bool) -> str:
            ins = [x for b in range(tap_kb) for x in self._kblock(ob, first and b == 0)]
            return self._asm(ob, ins, first, None)

        ptrs = [f"const int8_t* xq{j} = tp{j}[0];" for j in range(px)]
        out = [block("", [*ptrs, tap(True)])]
        if taps > 1:
            out.append(block(f"for (int32_t t = 1; t < {taps}; ++t)",
                             [*(f"const int8_t* xq{j} = tp{j}[t];" for j in range(px)), tap(False)]))
        return lines(out)

    def _vectors(self, ob: int) -> list[tuple[list[str], str, str, int]]:
        """(the lanes' accumulators, the lane-order table offset, the store address, the pixel pair) of each
        output vector of a block of `ob` channels."""
        if self.lane == 4:
            return [([f"a{4 * q + t}_{j}" for t in range(4)], f"oc + {4 * q}", f"y{j} + oc + {4 * q}", -1)
                    for j in range(self.px) for q in range(ob // 4)]
        return [([f"a0_{2 * jj}", f"a1_{2 * jj}", f"a0_{2 * jj + 1}", f"a1_{2 * jj + 1}"], "2 * oc",
                 f"y{2 * jj} + oc", jj) for jj in range(self.px // 2)]

    def _epilogue(self, ob: int, padded: bool) -> str:
        v = self.v
        vecs = self._vectors(ob)
        offsets = list(dict.fromkeys(off for _, off, _, _ in vecs))  # the block's operand vectors, loaded once
        width = 1 + (0 if self.rq_locals else self.rq_width)
        out = [f"const int32_t* const ep = &{self.ep_table}[({offsets[0]}) * {width}];"]
        for k in range(len(offsets)):
            at = 4 * width * k
            out.append(f"const int32x4_t init{k} = vldrwq_s32(ep + {at});")
            if not self.rq_locals:
                out += [f"const int32x4_t rq{t}_{k} = vldrwq_s32(ep + {at + 4 * (t + 1)});"
                        for t in range(self.rq_width)]
        for accs, off, dst, pair in vecs:
            k = offsets.index(off)
            ops = list(self.rq_locals) if self.rq_locals else [f"rq{t}_{k}" for t in range(self.rq_width)]
            val = [f"int32x4_t r = vaddq_s32({v.lanes4(*accs)}, init{k});",
                   f"r = {self.rq_fn}(r, {', '.join(ops)});",
                   f"r = vminq_s32(vmaxq_s32(vaddq_n_s32(r, {self.zp}), vdupq_n_s32({self.lo})), "
                   f"vdupq_n_s32({self.hi}));"]
            pred = None
            if self.lane == 4:
                # with padded channels only the block's last four channels hold some: the pixel's last vector
                if padded and off == offsets[-1]:
                    pred = v.pred32(range(self.n % 4))
                val.append(f"vstrbq_p_s32({dst}, r, {pred});" if pred else f"vstrbq_s32({dst}, r);")
            else:
                pred = v.pred32((0, 2)) if padded else None
                val.append(f"vstrbq_scatter_offset_p_s32({dst}, offs{pair}, r, {pred});" if pred else
                           f"vstrbq_scatter_offset_s32({dst}, offs{pair}, r);")
            out.append(block("", val))
        return lines(out)


# --- the whole kernel -----------------------------------------------------------------------------------------------

#: the largest skip from one window row to the next that one ADDW takes (`cols = window` reads rows in place)
MAX_ROW_SKIP = 4095


def row_skip(win: Window) -> int:
    """Bytes from the end of a window row to the start of the next, in the input (`cols = window`)."""
    return (win.dh * win.w - win.kw) * win.c


def _window_blocks(ctx: KernelContext, gemm: MveBlock, win: Window, oh: int, ow: int, input_zp: int) -> str:
    """`cols = window` (channels a multiple of 16): a block of pixels whose windows lie inside the input reads
    their rows in place (contiguous when the dilation across is 1), any other block tap by tap from tables of
    pointers (a tap in the padding reads a constant row of the input zero point). No scratch."""
    px = gemm.px
    rows_in, cols_in = win.always_inside(oh, ow)
    # rows in place: contiguous (no dilation across), one ADDW apart, and some window fits the input
    rows_ok = (win.dw == 1 and 0 <= row_skip(win) <= MAX_ROW_SKIP and win.kw <= win.w
               and (win.kh - 1) * win.dh < win.h)
    out: list[str] = []
    rows_path = ""
    if rows_ok:
        by_rows = replace(gemm, rows=(win.kh, win.kw * win.c // 16, row_skip(win)))
        rows_path = lines([f"const int8_t* const xp{j} = xb + (iy0_{j} * {win.w} + ix0_{j}) * {win.c};"
                           for j in range(px)], by_rows.all_channels())
        if rows_in and cols_in:
            return lines([f"(void)iy0_{j}; (void)ix0_{j};" for j in range(px)], rows_path)
    zp_row = const_table(ctx, "int8_t", [input_zp] * win.c, "zprow")
    by_taps = replace(gemm, taps=(win.kh * win.kw, win.c // 16))
    fill = []
    for j in range(px):
        fill.append(f"const int8_t* tp{j}[{win.kh * win.kw}];")
        fill.append(for_loop("ky", 0, win.kh, [
            f"const int32_t iy = iy0_{j} + ky * {win.dh};",
            for_loop("kx", 0, win.kw, [
                f"const int32_t ix = ix0_{j} + kx * {win.dw};",
                f"tp{j}[ky * {win.kw} + kx] = iy >= 0 && iy < {win.h} && ix >= 0 && ix < {win.w} ? "
                f"xb + (iy * {win.w} + ix) * {win.c} : {zp_row};"])]))
    taps_path = lines(fill, by_taps.all_channels())
    if not rows_ok:
        return lines([f"(void)iy0_{j}; (void)ix0_{j};" for j in range(px)], taps_path)
    inside = " && ".join(f"iy0_{j} >= 0 && iy0_{j} + {(win.kh - 1) * win.dh} < {win.h} && "
                         f"ix0_{j} >= 0 && ix0_{j} + {win.kw - 1} < {win.w}" for j in range(px))
    out.append(block(f"if ({inside})", rows_path) + " else " + block("", taps_path))
    return lines(out)


def mve_gemm_kernel(ctx: KernelContext, s: Schedule, layer: GemmLayer, bias: np.ndarray | None) -> KernelCode:
    """An int8 conv/dense as the MVE GEMM with schedule `s`; `bias`: the constant bias values (None: none)."""
    v = ctx.isa
    v.use_mve()
    shape, st = layer.shape, layer.stage
    win, n, m = shape.win, shape.n, shape.m
    k, kp = win.k, kp16(win.k)
    px, ob = s["px_block"], s["oc_block"]
    inplace = s["cols"] == "inplace"
    reason = requant_reason(st)
    if reason:
        raise ctx.error(f"MVE requantization: {reason}")
    w_table = const_table(ctx, "int8_t", pack_weights(layer.weights, ob), "wmve")
    right_only = max(st.shift) <= -1
    rq_fn = (mve_requant_right_helper if right_only else mve_requant_helper)(ctx, st.rounding)
    operands = ([list(st.multiplier), list(st.shift)] if right_only else
                [list(st.multiplier), [max(x, 0) for x in st.shift], [max(-x, 0) for x in st.shift]])
    uniform = len(set(st.multiplier)) == 1 and len(set(st.shift)) == 1
    head: list[str] = []
    columns = [folded_init(layer.weights, bias, st.input_zp)]
    if uniform:
        rq_locals = tuple(f"rqv{t}" for t in range(len(operands)))
        head += [f"const int32x4_t rqv{t} = vdupq_n_s32({c[0]});" for t, c in enumerate(operands)]
    else:
        rq_locals = ()
        columns += operands
    ep_table = const_table(ctx, "int32_t", epilogue_table(columns, ob), "ep")
    gemm = MveBlock(v, n, ob, px, kp // 16, s["kb_unroll"], w_table, ep_table, rq_fn, rq_locals, len(operands),
                    st.output_zp, st.act_min, st.act_max, v.pred8(k % 16) if inplace and k % 16 else None,
                    s["k_loop"] == "asm")
    advance = block(f"if (++ox == {shape.ow})", ["ox = 0;", "++oy;"])
    ragged = m % px != 0

    def step(j: int) -> str:
        """Move (oy, ox) to the next pixel, unless pixel j is the last (a short last block repeats it)."""
        return block(f"if (p0 + {j + 1} < {m})", advance) if ragged else advance

    scratch = 0
    per_pixel: list[str] = []
    if inplace:  # a 1x1 window without padding (or a dense row): the pixel's channels where they are
        for j in range(px):
            per_pixel += [f"const int8_t* const xp{j} = xb + (oy * {win.sh * win.w} + ox * {win.sw}) * {win.c};",
                          step(j)]
    elif s["cols"] == "window":  # each pixel's window origin; its rows or taps are read in place
        for j in range(px):
            per_pixel += [f"const int32_t iy0_{j} = oy * {win.sh} - {win.pt};",
                          f"const int32_t ix0_{j} = ox * {win.sw} - {win.pl};", step(j)]
    else:
        scratch = px * kp
        head += ["int8_t* const cols = (int8_t*)(void*)scratch;",
                 f"const int8x16_t zpv = vdupq_n_s8({st.input_zp});  /* padding taps: the input zero point */",
                 "(void)zpv;"]
        if kp > k:  # the reduction's padding: zeros, written once
            head.append(for_loop("j", 0, px, v.fill_bytes(f"cols + j * {kp} + {k}", "vdupq_n_s8(0)", kp - k)))
        fill = for_loop("j", 0, px, [f"const int32_t iy0 = oy * {win.sh} - {win.pt};",
                                     f"const int32_t ix0 = ox * {win.sw} - {win.pl};", "(void)iy0;", "(void)ix0;",
                                     f"int8_t* const col = cols + j * {kp};",
                                     im2col(v, win, shape.oh, shape.ow, "xb", "col"),
                                     block(f"if (p0 + j + 1 < {m})", advance) if ragged else advance])
        per_pixel += [fill, *(f"const int8_t* const xp{j} = cols + {j * kp};" for j in range(px))]
    rows = ["int8_t* const y0 = yb + p0 * " + str(n) + ";"]
    for j in range(1, px):
        rows.append(f"int8_t* const y{j} = yb + (p0 + {j} < {m} ? p0 + {j} : {m - 1}) * {n};" if ragged
                    else f"int8_t* const y{j} = y0 + {j * n};")
    if gemm.lane == 2:  # each pixel pair's scatter offsets 0, 1, d, d + 1 (d: the second pixel's distance)
        # lane numbers by VIDUP (0, 1, 2, 3): plain lane semantics (vcreateq's halves run in the other order
        # under QEMU 7.2 than GCC 12 puts them)
        head += ["const uint32x4_t lane_index = vidupq_n_u32(0u, 1);",
                 "const uint32x4_t lanes_0101 = vandq_u32(lane_index, vdupq_n_u32(1u));",
                 "const uint32x4_t lanes_0011 = vshrq_n_u32(lane_index, 1);"]
        rows += [f"const uint32x4_t offs{jj} = vmlaq_n_u32(lanes_0101, lanes_0011, "
                 f"(uint32_t)(y{2 * jj + 1} - y{2 * jj}));" for jj in range(px // 2)]
    if s["cols"] == "window":
        channels = _window_blocks(ctx, gemm, win, shape.oh, shape.ow, st.input_zp)
    else:
        channels = gemm.all_channels()
    pixels = block(f"for (int32_t p0 = 0; p0 < {m}; p0 += {px})", [*per_pixel, *rows, channels])
    core = lines(head, for_loop("b", 0, shape.batch, [
        f"const int8_t* const xb = {layer.x} + b * {win.h * win.w * win.c};",
        f"int8_t* const yb = {layer.y} + b * {m * n};",
        "int32_t oy = 0;", "int32_t ox = 0;", pixels, "(void)oy;", "(void)ox;"]), "return 0;")
    attrs = ctx.helper("no_sched") if s["no_sched"] else ""
    return KernelCode(body=layer.note + core, scratch_bytes=scratch, attributes=attrs)
