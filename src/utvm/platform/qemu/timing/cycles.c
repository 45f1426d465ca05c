/*
 * cycles.c -- QEMU TCG plugin: instructions and estimated cycles of marked regions, under a timing model of
 * one Cortex-M core (docs/timing.md).
 *
 *   qemu-system-arm ... -plugin libutvm_cycles.so,core=m4,start=0x1234,end=0x1238[,start=..,end=..],out=FILE
 *
 * Regions: a region opens when the instruction at a `start` address executes and closes when the
 * instruction at the matching `end` executes (the k-th end goes with the k-th start; up to MAX_PAIRS
 * pairs). A region counts the instructions of [start, end) and their estimated cycles, whatever was called
 * in between; a start that executes again while its region is open restarts it. Each closed region writes
 * one line to FILE (stderr without out=), flushed at once:
 *
 *   region=<k> insns=<instructions> cycles=<estimated cycles>
 *
 * and the exit writes `regions=<k> insns=<all instructions> cycles=<all cycles>` (with ` open=1` when a
 * region never closed).
 *
 * The model (core=m4|m7|m33|m55): when QEMU translates a block, each Thumb instruction is decoded (16- or
 * 32-bit encoding, from its bytes) into a class and a static cost from the core's table; costs that depend
 * on the neighbouring instruction within the block (load pipelining, IT folding, dual issue, MVE beat
 * overlap, load-use stalls) are settled then too. One inline add per instruction counts both figures at
 * once: the counter is (cycles << 32) + instructions, so a region's difference holds both as long as each
 * stays below 2^32 in one region. What only execution tells -- whether a conditional branch was taken, a
 * low-overhead loop's iteration, pipelining across a block boundary -- is settled by one callback per
 * executed block, which looks at where the previous block went. docs/timing.md lists every figure.
 *
 * Single vCPU (the MPS2/MPS3 boards have one; -icount runs TCG single-threaded). Written against QEMU plugin
 * API version 1 (QEMU 7.2); the few API declarations it uses are repeated below, so no QEMU header is needed:
 *   gcc -O2 -shared -fPIC -o libutvm_cycles.so cycles.c
 * Built with -DUTVM_CYCLES_SELFTEST it is instead a host program that prints the model's view of
 * instruction sequences read from stdin (see selftest_main at the end; the tests use it).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the core models -------------------------------------------------------------------------------------- */

/* Instruction classes. */
enum {
  K_ALU,      /* data processing, moves, shifts, extends, bit fields, saturation, DSP SIMD add/sub */
  K_MUL,      /* one-cycle multiplies and MACs: MUL, SMULxy/SMLAxy, SMUAD/SMLAD, SMMUL/SMMLA, (U|S)MULL/MLAL */
  K_MLA,      /* MLA, MLS */
  K_DIV,      /* SDIV, UDIV */
  K_LD,       /* single load: LDR/LDRB/LDRH/LDRSB/LDRSH (immediate, register, literal) */
  K_LDX,      /* exclusive load (never pipelined) */
  K_ST,       /* single store, exclusive store */
  K_LDRD,     /* LDRD */
  K_STRD,     /* STRD */
  K_LDM,      /* LDM, POP (n registers) */
  K_STM,      /* STM, PUSH */
  K_LDPC,     /* LDR PC, [...] */
  K_TBB,      /* TBB, TBH */
  K_B,        /* B (direct) */
  K_BL,       /* BL */
  K_BCC,      /* B<cond> */
  K_CBZ,      /* CBZ, CBNZ */
  K_BX,       /* BX, BLX (register) */
  K_PCW,      /* a data-processing instruction writing PC (ADD PC, MOV PC) */
  K_IT,       /* IT */
  K_NOP,      /* NOP and hints, preloads */
  K_SYS,      /* barriers, MSR/MRS, CPS, SVC, BKPT, UDF, LCTP, branch-future hints */
  K_FP,       /* VFP one-cycle operations: VADD/VSUB/VMUL/VNMUL/VABS/VNEG/VMOV/VCVT/VCMP */
  K_FMAC,     /* VMLA/VMLS/VNMLA/VNMLS, VFMA/VFMS/VFNMA/VFNMS */
  K_FDIV,     /* VDIV.F32, VSQRT.F32 */
  K_FDIV64,   /* VDIV.F64, VSQRT.F64 */
  K_FMOV,     /* VMOV core register <-> S register or lane, VMRS, VMSR */
  K_FMOV2,    /* VMOV two core registers <-> D or two S registers */
  K_FLD,      /* VLDR.32 */
  K_FLD64,    /* VLDR.64 */
  K_FST,      /* VSTR.32 */
  K_FST64,    /* VSTR.64 */
  K_FLDM,     /* VLDM, VPOP (n words) */
  K_FSTM,     /* VSTM, VPUSH (n words) */
  K_MVE,      /* a beat-wise MVE (Helium) instruction on one of the vector pipes */
  K_MVE_GATHER, /* MVE gather load / scatter store (n elements) */
  K_MVE_SYS,  /* VPST, VPNOT, VCTP */
  K_DLS,      /* DLS, DLSTP */
  K_WLS,      /* WLS, WLSTP: a forward branch when the loop runs zero times */
  K_LE,       /* LE, LETP: the low-overhead loop's backward branch */
  K_UNKNOWN,  /* anything else: one cycle */
  K_COUNT
};

#ifdef UTVM_CYCLES_SELFTEST
static const char *const KIND_NAMES[K_COUNT] = {
    "alu", "mul", "mla", "div", "ld", "ldx", "st", "ldrd", "strd", "ldm", "stm", "ldpc", "tbb", "b", "bl",
    "bcc", "cbz", "bx", "pcw", "it", "nop", "sys", "fp", "fmac", "fdiv", "fdiv64", "fmov", "fmov2", "fld",
    "fld64", "fst", "fst64", "fldm", "fstm", "mve", "gather", "mvesys", "dls", "wls", "le", "unknown"};
#endif

/* MVE pipes (Cortex-M55). */
enum { PIPE_NONE, PIPE_LS, PIPE_INT, PIPE_MUL };
#ifdef UTVM_CYCLES_SELFTEST
static const char *const PIPE_NAMES[] = {"-", "ls", "int", "mul"};
#endif

#define R_SP (1u << 13)
#define R_LR (1u << 14)
#define R_PC (1u << 15)

typedef struct {
  uint8_t kind;
  uint8_t size;     /* 2 or 4 bytes */
  uint8_t n;        /* LDM/STM registers, VLDM/VSTM words, gather elements */
  uint8_t pipe;     /* MVE pipe */
  uint8_t di;       /* may pair with a neighbouring 16-bit instruction (M33/M55 limited dual issue) */
  uint8_t pcw;      /* writes PC: a branch */
  uint8_t in_it;    /* inside an IT block (conditional) */
  uint8_t it_len;   /* IT: instructions it covers */
  uint16_t reads;   /* core registers read */
  uint16_t writes;  /* core registers written */
  uint16_t addr;    /* core registers a load/store computes its address from */
  uint32_t target;  /* direct branch target (0: none) */
} Insn;

typedef struct {
  const char *name;
  uint8_t refill;   /* cycles a taken branch adds (pipeline refill); on the M7 a mispredicted one */
  uint8_t ld;       /* single load, not pipelined */
  uint8_t ld_pipe;  /* single load right behind a single load that does not feed its address */
  uint8_t ldrd;     /* LDRD / STRD */
  uint8_t mla;      /* MLA / MLS */
  uint8_t fld64;    /* VLDR.64 / VSTR.64 */
  uint8_t m7;       /* Cortex-M7 approximations: dual issue, load-use stall, static prediction, 64-bit bus */
  uint8_t dual16;   /* limited dual issue of 16-bit pairs */
  uint8_t mve;      /* beat-wise MVE and low-overhead loops */
} Core;

/* SDIV/UDIV take 2-12 cycles by the operands' leading bits; the plugin sees no register values and charges
 * the middle. */
#define DIV_CYCLES 7
#define FDIV_CYCLES 14
#define FDIV64_CYCLES 29

static const Core CORES[] = {
    /* name   refill ld ld_pipe ldrd mla fld64 m7 dual16 mve */
    {"m4", 2, 2, 1, 3, 2, 3, 0, 0, 0},
    {"m33", 2, 2, 1, 3, 2, 3, 0, 1, 0},
    {"m55", 2, 2, 1, 3, 2, 3, 0, 1, 1},
    {"m7", 4, 1, 1, 1, 1, 1, 1, 0, 0},
};

static unsigned popcount16(unsigned v) {
  unsigned n = 0;
  for (v &= 0xFFFFu; v != 0u; v &= v - 1u) {
    n++;
  }
  return n;
}

static uint32_t sign_extend(uint32_t value, unsigned bits) {
  uint32_t m = 1u << (bits - 1u);
  value &= (1u << bits) - 1u;
  return (value ^ m) - m;
}

static uint16_t reg(unsigned r) { return (uint16_t)(1u << (r & 15u)); }

/* ---- decoding ----------------------------------------------------------------------------------------- */

static void decode16(uint32_t hw, uint32_t pc, Insn *d) {
  d->size = 2;
  d->kind = K_ALU;
  if ((hw >> 14) == 0u) { /* 00xxxx: shift (immediate), add, subtract, move, compare */
    unsigned rd = hw & 7u;
    if ((hw >> 11) == 3u) { /* ADD/SUB register or 3-bit immediate */
      d->reads = reg((hw >> 3) & 7u);
      if ((hw & 0x400u) != 0u) {
        d->di = 1;
      } else {
        d->reads |= reg((hw >> 6) & 7u);
      }
      d->writes = reg(rd);
    } else if ((hw >> 13) == 0u) { /* LSL/LSR/ASR immediate (MOVS register) */
      d->reads = reg((hw >> 3) & 7u);
      d->writes = reg(rd);
    } else { /* MOV/CMP/ADD/SUB 8-bit immediate */
      unsigned rdn = (hw >> 8) & 7u;
      unsigned op = (hw >> 11) & 3u;
      if (op == 0u) {
        d->writes = reg(rdn);
        d->di = 1;
      } else if (op == 1u) {
        d->reads = reg(rdn);
      } else {
        d->reads = d->writes = reg(rdn);
        d->di = 1;
      }
    }
  } else if ((hw >> 10) == 0x10u) { /* data processing (register) */
    unsigned op = (hw >> 6) & 0xFu;
    unsigned rdn = hw & 7u;
    unsigned rm = (hw >> 3) & 7u;
    d->reads = reg(rm);
    if (op != 9u && op != 15u) { /* RSB #0 and MVN read only Rm */
      d->reads |= reg(rdn);
    }
    if (op != 8u && op != 10u && op != 11u) { /* TST, CMP, CMN write only flags */
      d->writes = reg(rdn);
    }
    if (op == 13u) {
      d->kind = K_MUL;
    }
  } else if ((hw >> 10) == 0x11u) { /* special data processing, branch and exchange */
    unsigned op = (hw >> 8) & 3u;
    unsigned rdn = (hw & 7u) | ((hw >> 4) & 8u);
    unsigned rm = (hw >> 3) & 0xFu;
    if (op == 3u) {
      d->kind = K_BX;
      d->pcw = 1;
      d->reads = reg(rm);
      if ((hw & 0x80u) != 0u) {
        d->writes = R_LR;
      }
    } else {
      d->reads = reg(rm);
      if (op != 2u) {
        d->reads |= reg(rdn);
      }
      if (op != 1u) {
        d->writes = reg(rdn);
        if (rdn == 15u) {
          d->kind = K_PCW;
          d->pcw = 1;
        } else if (op == 2u) {
          d->di = 1;
        }
      }
    }
  } else if ((hw >> 11) == 9u) { /* LDR literal */
    d->kind = K_LD;
    d->writes = reg((hw >> 8) & 7u);
    d->addr = d->reads = R_PC;
  } else if ((hw >> 12) == 5u) { /* load/store (register offset) */
    unsigned opb = (hw >> 9) & 7u;
    d->addr = reg((hw >> 6) & 7u) | reg((hw >> 3) & 7u);
    d->reads = d->addr;
    if (opb < 3u) {
      d->kind = K_ST;
      d->reads |= reg(hw & 7u);
    } else {
      d->kind = K_LD;
      d->writes = reg(hw & 7u);
    }
  } else if ((hw >> 13) == 3u || (hw >> 12) == 8u) { /* load/store word, byte, halfword (immediate) */
    d->addr = d->reads = reg((hw >> 3) & 7u);
    if ((hw & 0x800u) != 0u) {
      d->kind = K_LD;
      d->writes = reg(hw & 7u);
    } else {
      d->kind = K_ST;
      d->reads |= reg(hw & 7u);
    }
  } else if ((hw >> 12) == 9u) { /* load/store SP-relative */
    d->addr = d->reads = R_SP;
    if ((hw & 0x800u) != 0u) {
      d->kind = K_LD;
      d->writes = reg((hw >> 8) & 7u);
    } else {
      d->kind = K_ST;
      d->reads |= reg((hw >> 8) & 7u);
    }
  } else if ((hw >> 12) == 0xAu) { /* ADR, ADD Rd, SP, #imm */
    d->reads = (hw & 0x800u) != 0u ? R_SP : R_PC;
    d->writes = reg((hw >> 8) & 7u);
  } else if ((hw >> 12) == 0xBu) { /* miscellaneous */
    if ((hw & 0xF500u) == 0xB100u) {
      uint32_t imm = (((hw >> 9) & 1u) << 6) | (((hw >> 3) & 0x1Fu) << 1);
      d->kind = K_CBZ;
      d->pcw = 1;
      d->reads = reg(hw & 7u);
      d->target = pc + 4u + imm;
    } else if ((hw & 0xFF00u) == 0xB000u) { /* ADD/SUB SP, SP, #imm */
      d->reads = d->writes = R_SP;
    } else if ((hw & 0xFF00u) == 0xB200u) { /* SXTH, SXTB, UXTH, UXTB */
      d->reads = reg((hw >> 3) & 7u);
      d->writes = reg(hw & 7u);
      d->di = 1;
    } else if ((hw & 0xFE00u) == 0xB400u) { /* PUSH */
      uint16_t list = (uint16_t)((hw & 0xFFu) | ((hw & 0x100u) != 0u ? R_LR : 0u));
      d->kind = K_STM;
      d->n = (uint8_t)popcount16(list);
      d->reads = (uint16_t)(list | R_SP);
      d->writes = R_SP;
      d->addr = R_SP;
    } else if ((hw & 0xFE00u) == 0xBC00u) { /* POP */
      uint16_t list = (uint16_t)((hw & 0xFFu) | ((hw & 0x100u) != 0u ? R_PC : 0u));
      d->kind = K_LDM;
      d->n = (uint8_t)popcount16(list);
      d->reads = d->addr = R_SP;
      d->writes = (uint16_t)(list | R_SP);
      d->pcw = (list & R_PC) != 0u;
    } else if ((hw & 0xFF00u) == 0xBA00u) { /* REV, REV16, REVSH */
      d->reads = reg((hw >> 3) & 7u);
      d->writes = reg(hw & 7u);
    } else if ((hw & 0xFF00u) == 0xBF00u) { /* IT and hints */
      unsigned mask = hw & 0xFu;
      if (mask != 0u) {
        unsigned len = 4u;
        while ((mask & 1u) == 0u) {
          mask >>= 1;
          len--;
        }
        d->kind = K_IT;
        d->it_len = (uint8_t)len;
      } else {
        d->kind = K_NOP;
      }
    } else { /* CPS, BKPT, CBZ handled above */
      d->kind = K_SYS;
    }
  } else if ((hw >> 12) == 0xCu) { /* STM, LDM */
    unsigned rn = (hw >> 8) & 7u;
    uint16_t list = (uint16_t)(hw & 0xFFu);
    d->n = (uint8_t)popcount16(list);
    d->addr = reg(rn);
    if ((hw & 0x800u) != 0u) {
      d->kind = K_LDM;
      d->reads = reg(rn);
      d->writes = (uint16_t)(list | ((list & reg(rn)) != 0u ? 0u : reg(rn)));
    } else {
      d->kind = K_STM;
      d->reads = (uint16_t)(list | reg(rn));
      d->writes = reg(rn);
    }
  } else if ((hw >> 12) == 0xDu) { /* B<cond>, UDF, SVC */
    unsigned cond = (hw >> 8) & 0xFu;
    if (cond >= 0xEu) {
      d->kind = K_SYS;
    } else {
      d->kind = K_BCC;
      d->pcw = 1;
      d->target = pc + 4u + (sign_extend(hw & 0xFFu, 8) << 1);
    }
  } else if ((hw >> 11) == 0x1Cu) { /* B */
    d->kind = K_B;
    d->pcw = 1;
    d->target = pc + 4u + (sign_extend(hw & 0x7FFu, 11) << 1);
  } else {
    d->kind = K_UNKNOWN;
  }
}

/* The MVE pipe of an instruction in the coprocessor-14/15 part of the 111x 1110 space (Armv8.1-M). */
static uint8_t mve_pipe_cdp(uint32_t hw1, uint32_t hw2) {
  if ((hw1 & 0x0080u) != 0u) {
    unsigned f = (hw1 >> 4) & 7u;
    if (f == 7u) {
      return PIPE_MUL; /* VMLADAV/VMLAV/VMLSDAV family, VADDV */
    }
    if (f == 0u && (hw2 & 1u) == 0u) {
      return PIPE_MUL; /* VMLALDAV/VRMLALDAVH family, VADDLV */
    }
    return PIPE_INT; /* VMAXV/VMINV, VABAV, VMOVL, VSHLL, VSHRN/VQRSHRN, ... */
  }
  if ((hw2 & 0x0F00u) == 0x0E00u) {
    if (((hw1 >> 4) & 3u) != 3u) {
      return PIPE_MUL; /* VMUL/VMLA/VMLAS/VQDMULH/VQRDMULH by a scalar, VMULL, VMULH, VQDMLADH */
    }
    if ((hw1 & 0xEFFFu) == 0xEE33u || (hw1 & 0xEFFFu) == 0xEE3Fu) {
      return PIPE_MUL; /* floating-point VMUL/VFMA by a scalar, VMINNMA/VMAXNMA */
    }
    return PIPE_INT; /* VMOVN/VQMOVN, VSHL/VRSHL/VQRSHL by a scalar */
  }
  if ((hw1 & 0xFFB1u) == 0xFE01u || (hw1 & 0xEFBFu) == 0xEE31u) {
    return PIPE_MUL; /* VCMP, VPT (the comparisons go down the float/multiply pipe) */
  }
  if ((hw1 & 0xEFFEu) == 0xEE32u && (hw2 & 0x0050u) == 0x0040u) {
    return PIPE_MUL; /* floating-point VADD/VSUB by a scalar */
  }
  return PIPE_INT; /* VADD/VSUB/VQADD/VHADD by a scalar, VPSEL, VIDUP, VADC, VCADD, ... */
}

/* The MVE pipe of an instruction in the 111x 1111 space (Advanced SIMD's on A-profile; MVE's on M-profile). */
static uint8_t mve_pipe_simd(uint32_t hw1, uint32_t hw2) {
  if ((hw1 & 0x0080u) == 0u) { /* three registers of the same length */
    unsigned opc = (hw2 >> 8) & 0xFu;
    if (opc == 0x9u || opc == 0xBu || opc >= 0xCu) {
      return PIPE_MUL; /* VMUL (integer), VQDMULH/VQRDMULH, floating point */
    }
    return PIPE_INT;
  }
  if ((hw1 & 0xFFBFu) == 0xFFBBu) {
    return PIPE_MUL; /* VCVT between floating point and integer */
  }
  return PIPE_INT; /* shifts by an immediate, VMOV/VORR/VBIC immediate, VREV/VMVN/VABS/VNEG/VCLS/VCLZ */
}

/* 111x 11xx: coprocessor space (VFP on coprocessors 9-11, MVE on 14/15). */
static void decode_cp(uint32_t hw1, uint32_t hw2, Insn *d) {
  unsigned coproc = (hw2 >> 8) & 0xFu;
  bool fp = coproc >= 9u && coproc <= 11u;
  unsigned rn = hw1 & 0xFu;
  d->kind = K_UNKNOWN;
  if ((hw1 & 0x0E00u) == 0x0C00u) { /* 111x 110x: loads/stores and 64-bit transfers */
    if ((hw1 & 0x01A0u) == 0u) {    /* P = U = W = 0: two-register transfers */
      if (fp) {
        d->kind = K_FMOV2;
        if ((hw1 & 0x10u) != 0u) {
          d->writes = (uint16_t)(reg(hw2 >> 12) | reg(rn));
        } else {
          d->reads = (uint16_t)(reg(hw2 >> 12) | reg(rn));
        }
      } else { /* MVE VMOV of two lanes */
        d->kind = K_MVE;
        d->pipe = PIPE_INT;
      }
      return;
    }
    d->addr = d->reads = reg(rn);
    if (fp) {
      bool load = (hw1 & 0x10u) != 0u;
      if ((hw1 & 0x0120u) == 0x0100u) { /* P = 1, W = 0: VLDR/VSTR */
        bool dp = coproc == 11u;
        d->kind = load ? (dp ? K_FLD64 : K_FLD) : (dp ? K_FST64 : K_FST);
      } else { /* VLDM/VSTM/VPUSH/VPOP: imm8 words */
        d->kind = load ? K_FLDM : K_FSTM;
        d->n = (uint8_t)(hw2 & 0xFFu);
        if ((hw1 & 0x20u) != 0u) {
          d->writes = reg(rn);
        }
      }
      return;
    }
    d->kind = K_MVE;
    d->pipe = PIPE_LS;
    if ((hw1 & 0xEFE0u) == 0xEC80u && (hw2 & 0x1000u) == 0u) { /* gather/scatter, vector offsets */
      d->kind = K_MVE_GATHER;
      d->n = (uint8_t)(16u >> ((hw2 >> 7) & 3u));
    } else if ((hw1 & 0xFF80u) == 0xFD80u && (hw2 & 0x1E00u) == 0x1E00u) { /* gather/scatter, vector base */
      d->kind = K_MVE_GATHER;
      d->n = (hw2 & 0x0100u) != 0u ? 2u : 4u;
      d->addr = d->reads = 0;
    }
    return;
  }
  if ((hw1 & 0x0F00u) == 0x0E00u) { /* 111x 1110: data processing and register transfers */
    if (fp) {
      if ((hw2 & 0x10u) != 0u) { /* register transfer */
        if ((hw1 & 0xEF90u) == 0xEE80u && (hw2 & 0x0F5Fu) == 0x0B10u) { /* VDUP */
          d->kind = K_MVE;
          d->pipe = PIPE_INT;
          d->reads = reg(hw2 >> 12);
        } else {
          d->kind = K_FMOV;
          if ((hw1 & 0x10u) != 0u) {
            d->writes = reg(hw2 >> 12) & (uint16_t)~R_PC; /* VMRS APSR_nzcv writes flags */
          } else {
            d->reads = reg(hw2 >> 12);
          }
        }
        return;
      }
      unsigned opc1 = (hw1 >> 4) & 0xBu;
      bool dp = coproc == 11u;
      if (opc1 == 0x0u || opc1 == 0x1u || opc1 == 0x9u || opc1 == 0xAu) {
        d->kind = K_FMAC;
      } else if (opc1 == 0x8u || (opc1 == 0xBu && (hw1 & 0xFu) == 1u && (hw2 & 0xC0u) == 0xC0u)) {
        d->kind = dp ? K_FDIV64 : K_FDIV; /* VDIV, VSQRT */
      } else {
        d->kind = K_FP;
      }
      return;
    }
    if ((hw1 & 0xFFB1u) == 0xFE31u && (hw2 & 0x0FFFu) == 0x0F4Du) {
      d->kind = K_MVE_SYS; /* VPST, VPNOT */
      return;
    }
    d->kind = K_MVE;
    d->pipe = mve_pipe_cdp(hw1, hw2);
    return;
  }
  if ((hw1 & 0x0F00u) == 0x0F00u) { /* 111x 1111 */
    d->kind = K_MVE;
    d->pipe = mve_pipe_simd(hw1, hw2);
  }
}

static void decode32(uint32_t hw1, uint32_t hw2, uint32_t pc, Insn *d) {
  d->size = 4;
  d->kind = K_ALU;
  if ((hw1 & 0xFE00u) == 0xE800u) { /* load/store multiple, dual, exclusive, table branch */
    unsigned rn = hw1 & 0xFu;
    d->addr = d->reads = reg(rn);
    if ((hw1 & 0x0040u) == 0u) { /* LDM/STM (IA, DB), PUSH.W/POP.W */
      uint16_t list = (uint16_t)hw2;
      uint16_t wb = (hw1 & 0x20u) != 0u ? reg(rn) : 0u;
      d->n = (uint8_t)popcount16(list);
      if ((hw1 & 0x10u) != 0u) {
        d->kind = K_LDM;
        d->writes = (uint16_t)(list | wb);
        d->pcw = (list & R_PC) != 0u;
      } else {
        d->kind = K_STM;
        d->reads |= list;
        d->writes = wb;
      }
    } else if ((hw1 & 0xFFF0u) == 0xE8D0u && (hw2 & 0xFFE0u) == 0xF000u) { /* TBB, TBH */
      d->kind = K_TBB;
      d->pcw = 1;
      d->addr = d->reads = (uint16_t)(reg(rn) | reg(hw2 & 0xFu));
    } else if ((hw1 & 0x0120u) != 0u) { /* LDRD/STRD (P or W set) */
      uint16_t pair = (uint16_t)(reg(hw2 >> 12) | reg(hw2 >> 8));
      uint16_t wb = (hw1 & 0x20u) != 0u ? reg(rn) : 0u;
      if ((hw1 & 0x10u) != 0u) {
        d->kind = K_LDRD;
        d->writes = (uint16_t)(pair | wb);
      } else {
        d->kind = K_STRD;
        d->reads |= pair;
        d->writes = wb;
      }
    } else if ((hw1 & 0x10u) != 0u) { /* LDREX(B/H) */
      d->kind = K_LDX;
      d->writes = reg(hw2 >> 12);
    } else { /* STREX(B/H) */
      d->kind = K_ST;
      d->reads |= reg(hw2 >> 12);
      d->writes = reg((hw1 & 0x0080u) != 0u ? hw2 : hw2 >> 8);
    }
    return;
  }
  if ((hw1 & 0xFE00u) == 0xEA00u) { /* data processing (shifted register); Armv8.1-M long shifts */
    unsigned rn = hw1 & 0xFu;
    unsigned rd = (hw2 >> 8) & 0xFu;
    d->reads = reg(hw2 & 0xFu);
    if (rn != 15u) {
      d->reads |= reg(rn);
    }
    if (!(rd == 15u && (hw1 & 0x10u) != 0u)) { /* TST/TEQ/CMP/CMN write only flags */
      d->writes = reg(rd) & (uint16_t)~R_PC;
    }
    return;
  }
  if ((hw1 & 0xEC00u) == 0xEC00u) {
    decode_cp(hw1, hw2, d);
    return;
  }
  if ((hw1 & 0xF800u) == 0xF000u) {
    if ((hw2 & 0x8000u) == 0u) { /* data processing (modified or plain immediate) */
      unsigned rn = hw1 & 0xFu;
      unsigned rd = (hw2 >> 8) & 0xFu;
      bool plain = (hw1 & 0x0200u) != 0u;
      if (plain) {
        unsigned op = (hw1 >> 4) & 0x1Fu;
        if (op == 0x04u) { /* MOVW */
        } else if (op == 0x0Cu) { /* MOVT */
          d->reads = reg(rd);
        } else if (op == 0x16u) { /* BFI, BFC */
          d->reads = (uint16_t)(reg(rd) | (rn != 15u ? reg(rn) : 0u));
        } else {
          d->reads = reg(rn);
        }
        d->writes = reg(rd);
      } else {
        if (rn != 15u) {
          d->reads = reg(rn);
        }
        if (!(rd == 15u && (hw1 & 0x10u) != 0u)) {
          d->writes = reg(rd) & (uint16_t)~R_PC;
        }
      }
      return;
    }
    /* branches and miscellaneous control */
    if ((hw2 & 0xD000u) == 0xD000u || (hw2 & 0xD000u) == 0x9000u) { /* BL, B.W (T4) */
      uint32_t s = (hw1 >> 10) & 1u;
      uint32_t i1 = ((hw2 >> 13) & 1u) ^ s ^ 1u;
      uint32_t i2 = ((hw2 >> 11) & 1u) ^ s ^ 1u;
      uint32_t imm = (s << 24) | (i1 << 23) | (i2 << 22) | ((hw1 & 0x3FFu) << 12) | ((hw2 & 0x7FFu) << 1);
      d->kind = (hw2 & 0x4000u) != 0u ? K_BL : K_B;
      d->pcw = 1;
      d->target = pc + 4u + sign_extend(imm, 25);
      if (d->kind == K_BL) {
        d->writes = R_LR;
      }
      return;
    }
    if ((hw2 & 0xD000u) == 0x8000u) {
      unsigned cond = (hw1 >> 6) & 0xFu;
      if ((cond & 0xEu) != 0xEu) { /* B<cond>.W (T3) */
        uint32_t imm = (((hw1 >> 10) & 1u) << 20) | (((hw2 >> 11) & 1u) << 19) | (((hw2 >> 13) & 1u) << 18) |
                       ((hw1 & 0x3Fu) << 12) | ((hw2 & 0x7FFu) << 1);
        d->kind = K_BCC;
        d->pcw = 1;
        d->target = pc + 4u + sign_extend(imm, 21);
      } else if (hw1 == 0xF3AFu && (hw2 & 0xFF00u) == 0x8000u) {
        d->kind = K_NOP; /* NOP.W and hints */
      } else {
        d->kind = K_SYS; /* MSR, MRS, barriers, CPS, ... */
        if ((hw1 & 0xFFE0u) == 0xF3E0u) {
          d->writes = reg((hw2 >> 8) & 0xFu); /* MRS */
        } else if ((hw1 & 0xFFE0u) == 0xF380u) {
          d->reads = reg(hw1 & 0xFu); /* MSR */
        }
      }
      return;
    }
    /* hw2 = 11x0 ...: Armv8.1-M low-overhead loops, VCTP, branch future */
    if (hw1 == 0xF00Fu && hw2 == 0xE001u) {
      d->kind = K_SYS; /* LCTP */
    } else if ((hw1 & 0xFF80u) == 0xF000u && hw2 == 0xE001u) {
      d->kind = K_DLS; /* DLS, DLSTP */
      d->reads = reg(hw1 & 0xFu);
      d->writes = R_LR;
    } else if ((hw1 & 0xFFC0u) == 0xF000u && hw2 == 0xE801u) {
      d->kind = K_MVE_SYS; /* VCTP */
      d->reads = reg(hw1 & 0xFu);
    } else if ((hw1 & 0xFFCFu) == 0xF00Fu && (hw2 & 0xF001u) == 0xC001u) { /* LE, LETP */
      uint32_t off = (((hw2 >> 1) & 0x3FFu) << 2) | (((hw2 >> 11) & 1u) << 1);
      d->kind = K_LE;
      d->pcw = 1;
      d->reads = d->writes = R_LR;
      d->target = pc + 4u - off;
    } else if ((hw1 & 0xFF80u) == 0xF000u && (hw2 & 0xF001u) == 0xC001u) { /* WLS, WLSTP */
      uint32_t off = (((hw2 >> 1) & 0x3FFu) << 2) | (((hw2 >> 11) & 1u) << 1);
      d->kind = K_WLS;
      d->pcw = 1;
      d->reads = reg(hw1 & 0xFu);
      d->writes = R_LR;
      d->target = pc + 4u + off;
    } else {
      d->kind = K_SYS; /* BF, BFX, BFL, BFCSEL; BLX (immediate) is undefined on M-profile */
    }
    return;
  }
  if ((hw1 & 0xFE00u) == 0xF800u) { /* load/store single */
    unsigned size = (hw1 >> 5) & 3u;
    unsigned rn = hw1 & 0xFu;
    unsigned rt = hw2 >> 12;
    bool load = (hw1 & 0x10u) != 0u;
    if (size == 3u) {
      d->kind = K_UNKNOWN;
      return;
    }
    d->addr = reg(rn);
    if ((hw1 & 0x80u) == 0u && rn != 15u) {
      if ((hw2 & 0x0FC0u) == 0u) {
        d->addr |= reg(hw2 & 0xFu); /* register offset */
      } else if ((hw2 & 0x0900u) == 0x0900u) {
        d->writes = reg(rn); /* pre/post-indexed with writeback */
      }
    }
    d->reads = d->addr;
    if (load) {
      if (rt == 15u) {
        if (size == 2u) {
          d->kind = K_LDPC;
          d->pcw = 1;
        } else {
          d->kind = K_NOP; /* PLD, PLI */
        }
      } else {
        d->kind = K_LD;
        d->writes |= reg(rt);
      }
    } else {
      d->kind = K_ST;
      d->reads |= reg(rt);
    }
    return;
  }
  if ((hw1 & 0xFF00u) == 0xFA00u) { /* data processing (register): shifts, extends, SIMD add/sub, CLZ, ... */
    unsigned rn = hw1 & 0xFu;
    d->reads = reg(hw2 & 0xFu);
    if (rn != 15u) {
      d->reads |= reg(rn);
    }
    d->writes = reg((hw2 >> 8) & 0xFu);
    return;
  }
  if ((hw1 & 0xFF80u) == 0xFB00u) { /* multiply, multiply-accumulate, absolute difference */
    unsigned ra = hw2 >> 12;
    d->reads = (uint16_t)(reg(hw1 & 0xFu) | reg(hw2 & 0xFu) | (ra != 15u ? reg(ra) : 0u));
    d->writes = reg((hw2 >> 8) & 0xFu);
    d->kind = (((hw1 >> 4) & 7u) == 0u && ra != 15u) ? K_MLA : K_MUL;
    return;
  }
  if ((hw1 & 0xFF80u) == 0xFB80u) { /* long multiply, long multiply-accumulate, divide */
    unsigned op1 = (hw1 >> 4) & 7u;
    d->reads = (uint16_t)(reg(hw1 & 0xFu) | reg(hw2 & 0xFu));
    if ((op1 == 1u || op1 == 3u) && ((hw2 >> 4) & 0xFu) == 0xFu) {
      d->kind = K_DIV;
      d->writes = reg((hw2 >> 8) & 0xFu);
    } else {
      uint16_t pair = (uint16_t)(reg(hw2 >> 12) | reg((hw2 >> 8) & 0xFu));
      d->kind = K_MUL;
      if (op1 >= 4u) {
        d->reads |= pair;
      }
      d->writes = pair;
    }
    return;
  }
  d->kind = K_UNKNOWN;
}

/* Decode the instruction at `pc` from its bytes (little-endian halfwords). */
static void decode(const uint8_t *bytes, size_t size, uint32_t pc, Insn *d) {
  uint32_t hw1 = (uint32_t)bytes[0] | ((uint32_t)bytes[1] << 8);
  memset(d, 0, sizeof(*d));
  if (size >= 4u) {
    uint32_t hw2 = (uint32_t)bytes[2] | ((uint32_t)bytes[3] << 8);
    decode32(hw1, hw2, pc, d);
  } else {
    decode16(hw1, pc, d);
  }
}

/* ---- costs -------------------------------------------------------------------------------------------- */

/* How a block's last instruction continues, settled when the next block runs. */
enum { END_NONE, END_COND_DIRECT, END_COND_INDIRECT, END_LE };

typedef struct {
  uint32_t pc;          /* the block's first instruction */
  uint32_t fallthrough; /* the address after its last instruction */
  uint32_t target;      /* direct target of the last instruction */
  uint32_t last_pc;     /* address of the last instruction */
  uint8_t end;          /* END_* */
  uint8_t taken;        /* cycles added when the last (conditional) branch was taken */
  uint8_t not_taken;    /* cycles added when it was not taken (M7: predicted taken) */
  uint8_t tail_load;    /* last instruction: a single load that the next one may pipeline behind */
  uint16_t tail_writes; /* registers the last instruction writes */
  uint8_t head_load;    /* first instruction: a single load that may pipeline behind a load */
  uint16_t head_addr;   /* its address registers */
  uint8_t tail_pipe;    /* MVE pipe of the last vector instruction before the block's end (M55) */
  uint8_t head_pipe;    /* MVE pipe of the first instruction */
} Block;

static bool conditional_branch(const Insn *d) {
  return d->kind == K_BCC || d->kind == K_CBZ || d->kind == K_WLS || d->kind == K_LE ||
         (d->pcw != 0u && d->in_it != 0u);
}

/* The cost of an instruction alone (an unconditional branch with its refill; a conditional one without). */
static unsigned base_cost(const Core *c, const Insn *d) {
  unsigned n = d->n;
  unsigned refill = c->refill;
  bool cond = conditional_branch(d);
  switch (d->kind) {
  case K_MUL:
    return 1;
  case K_MLA:
    return c->mla;
  case K_DIV:
    return DIV_CYCLES;
  case K_LD:
  case K_LDX:
    return c->ld;
  case K_ST:
    return 1;
  case K_LDRD:
  case K_STRD:
    return c->ldrd;
  case K_LDM:
  case K_STM:
    return (c->m7 ? 1u + (n + 1u) / 2u : 1u + n) + (d->pcw && !cond ? refill : 0u);
  case K_LDPC:
    return (c->m7 ? 1u : 2u) + (cond ? 0u : refill);
  case K_TBB:
    return 2u + (cond ? 0u : refill);
  case K_B:
  case K_BL:
    if (cond) {
      return 1;
    }
    return c->m7 ? 1u : 1u + refill; /* the M7 predicts direct branches */
  case K_BX:
  case K_PCW:
    return 1u + (cond ? 0u : refill);
  case K_BCC:
  case K_CBZ:
  case K_WLS:
    return 1;
  case K_LE:
    return c->mve ? 0u : 1u; /* M55: settled when the next block runs */
  case K_IT:
    return 1;
  case K_FMAC:
    return 3;
  case K_FDIV:
    return FDIV_CYCLES;
  case K_FDIV64:
    return FDIV64_CYCLES;
  case K_FMOV2:
    return 2;
  case K_FLD:
  case K_FST:
    return c->m7 ? 1u : 2u;
  case K_FLD64:
  case K_FST64:
    return c->fld64;
  case K_FLDM:
  case K_FSTM:
    return c->m7 ? 1u + (n + 1u) / 2u : 1u + n;
  case K_MVE:
    return 2; /* 4 beats, 2 beats per cycle */
  case K_MVE_GATHER:
    return n > 2u ? n : 2u; /* one element per cycle */
  default:
    return 1;
  }
}

static bool single_load(const Insn *d) { return d->kind == K_LD; }

/* M7: instructions that can issue as either half of a pair (a branch only as the second). */
static bool m7_pairable(const Insn *d) {
  switch (d->kind) {
  case K_ALU:
  case K_MUL:
  case K_MLA:
  case K_LD:
  case K_ST:
  case K_LDRD:
  case K_STRD:
  case K_FP:
  case K_FMOV:
  case K_FLD:
  case K_FST:
  case K_FLD64:
  case K_FST64:
  case K_NOP:
    return true;
  default:
    return false;
  }
}

static bool is_memory(const Insn *d) {
  return d->kind == K_LD || d->kind == K_ST || d->kind == K_LDRD || d->kind == K_STRD || d->kind == K_FLD ||
         d->kind == K_FST || d->kind == K_FLD64 || d->kind == K_FST64;
}

static bool is_fp(const Insn *d) {
  return d->kind == K_FP || d->kind == K_FMOV || d->kind == K_FMAC || d->kind == K_FLD || d->kind == K_FST ||
         d->kind == K_FLD64 || d->kind == K_FST64;
}

static bool is_load(const Insn *d) {
  return d->kind == K_LD || d->kind == K_LDX || d->kind == K_LDRD || d->kind == K_LDM;
}

/*
 * The static cost of each instruction of a block (`cost`), given the block's decoded instructions in order
 * (`in_it` already marked), and what the block's end leaves for the next block (`blk`).
 */
static void model_block(const Core *c, const Insn *d, size_t n, unsigned *cost, Block *blk) {
  bool paired_prev = false;
  for (size_t i = 0; i < n; i++) {
    const Insn *cur = &d[i];
    const Insn *prev = i > 0u ? &d[i - 1u] : NULL;
    unsigned k = base_cost(c, cur);
    bool paired = false;
    if (prev != NULL) {
      if (cur->kind == K_IT && prev->size == 2u) {
        k = 0; /* IT folds onto a preceding 16-bit instruction */
      }
      if (!c->m7 && single_load(cur) && single_load(prev) && (cur->addr & prev->writes) == 0u) {
        k = c->ld_pipe; /* pipelined behind the previous load */
      }
      if (c->mve && cur->kind == K_MVE && prev->kind == K_MVE && cur->pipe != prev->pipe) {
        k = 1; /* its first beats overlap the previous instruction's last ones */
      }
      if (c->dual16 && !paired_prev && k > 0u && cur->size == 2u && prev->size == 2u && !prev->pcw &&
          prev->kind != K_IT && cur->kind != K_IT && (cur->di || prev->di) && (cur->reads & prev->writes) == 0u &&
          (cur->writes & prev->writes) == 0u) {
        k -= 1u; /* the pair issues together */
        paired = true;
      }
      if (c->m7) {
        if (is_load(prev) && (cur->reads & prev->writes) != 0u) {
          k += 1u; /* load-use: the loaded value arrives a cycle late */
        } else if (!paired_prev && k == 1u && m7_pairable(prev) &&
                   (m7_pairable(cur) || cur->kind == K_B || cur->kind == K_BCC || cur->kind == K_CBZ ||
                    cur->kind == K_BL) &&
                   (cur->reads & prev->writes) == 0u && (cur->writes & prev->writes) == 0u &&
                   !(is_memory(cur) && is_memory(prev)) &&
                   !((cur->kind == K_MUL || cur->kind == K_MLA) && (prev->kind == K_MUL || prev->kind == K_MLA)) &&
                   !(is_fp(cur) && is_fp(prev))) {
          k = 0; /* dual issue: the second half of a pair */
          paired = true;
        }
      }
    }
    cost[i] = k;
    paired_prev = paired;
  }
  memset(blk, 0, sizeof(*blk));
  if (n == 0u) {
    return;
  }
  const Insn *last = &d[n - 1u];
  const Insn *first = &d[0];
  blk->tail_load = !c->m7 && single_load(last);
  blk->tail_writes = last->writes;
  blk->head_load = !c->m7 && single_load(first);
  blk->head_addr = first->addr;
  blk->head_pipe = first->kind == K_MVE ? first->pipe : PIPE_NONE;
  if (last->kind == K_MVE) {
    blk->tail_pipe = last->pipe;
  } else if (last->kind == K_LE && n >= 2u && d[n - 2u].kind == K_MVE) {
    blk->tail_pipe = d[n - 2u].pipe;
  }
  if (last->kind == K_LE && c->mve) {
    blk->end = END_LE;
    blk->target = last->target;
  } else if (conditional_branch(last)) {
    /* Taken: the pipeline refills (the M7's static prediction is applied by predict_m7, which knows the
     * branch's address). */
    blk->end = last->target != 0u ? END_COND_DIRECT : END_COND_INDIRECT;
    blk->target = last->target;
    blk->taken = c->refill;
  }
}

/* M7's static predictor needs the branch's own address: fill in the block's taken/not-taken costs. */
static void predict_m7(const Core *c, Block *blk) {
  if (!c->m7 || blk->end != END_COND_DIRECT) {
    return;
  }
  if (blk->target <= blk->last_pc) { /* backward: predicted taken */
    blk->taken = 0;
    blk->not_taken = c->refill;
  } else { /* forward: predicted not taken */
    blk->taken = c->refill;
    blk->not_taken = 0;
  }
}

/* Mark the instructions an IT covers as conditional. */
static void mark_it(Insn *d, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (d[i].kind == K_IT) {
      for (size_t j = i + 1u; j < n && j <= i + d[i].it_len; j++) {
        d[j].in_it = 1;
      }
    }
  }
}

/* How many cycles the previous block's end and this block's start add, now that `next` runs after `p`. */
static uint32_t g_loop_le; /* M55: the LE whose loop is running (its first iteration has been paid) */

static int64_t settle(const Core *c, const Block *p, const Block *next) {
  int64_t extra = 0;
  bool fell_through = next->pc == p->fallthrough;
  switch (p->end) {
  case END_COND_DIRECT:
    extra += next->pc == p->target ? p->taken : p->not_taken;
    break;
  case END_COND_INDIRECT:
    if (!fell_through && !(next->pc >= p->pc && next->pc < p->fallthrough)) {
      extra += p->taken;
    }
    break;
  case END_LE:
    if (next->pc == p->target) {
      if (g_loop_le == p->last_pc) {
        /* a running loop: the branch costs nothing, and the vector instructions on either side of it overlap */
        if (p->tail_pipe != PIPE_NONE && next->head_pipe != PIPE_NONE && p->tail_pipe != next->head_pipe) {
          extra -= 1;
        }
      } else {
        extra += 1 + c->refill; /* the first iteration: the LE executes and the pipeline refills */
        g_loop_le = p->last_pc;
      }
    } else {
      extra += 1; /* the loop ends */
      g_loop_le = 0;
    }
    break;
  default:
    break;
  }
  if (fell_through && p->end == END_NONE) {
    if (p->tail_load && next->head_load && (next->head_addr & p->tail_writes) == 0u) {
      extra -= (int64_t)c->ld - (int64_t)c->ld_pipe;
    }
    if (c->mve && p->tail_pipe != PIPE_NONE && next->head_pipe != PIPE_NONE && p->tail_pipe != next->head_pipe) {
      extra -= 1;
    }
  }
  return extra;
}

#ifndef UTVM_CYCLES_SELFTEST
/* ---- QEMU plugin API (version 1, QEMU 7.2) declarations used here ----------------------------------------- */
typedef uint64_t qemu_plugin_id_t;
typedef struct {
  const char *target_name;
  struct {
    int min;
    int cur;
  } version;
  bool system_emulation;
  union {
    struct {
      int smp_vcpus;
      int max_vcpus;
    } system;
  } u; /* anonymous in QEMU's header; named here for C99 (same layout) */
} qemu_info_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, qemu_plugin_vcpu_udata_cb_t cb,
                                          enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn *insn, enum qemu_plugin_op op,
                                                void *ptr, uint64_t imm);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
#define QEMU_PLUGIN_EXPORT __attribute__((visibility("default")))
QEMU_PLUGIN_EXPORT int qemu_plugin_version = 1;
/* ------------------------------------------------------------------------------------------------------ */

#define MAX_PAIRS 32
#define MAX_BLOCK 512 /* QEMU's blocks hold at most TCG_MAX_INSNS (512) instructions */

static const Core *g_core;
static uint64_t g_counter; /* (cycles << 32) + instructions, both modulo 2^32 in a region's difference */
static uint64_t g_start_addr[MAX_PAIRS], g_end_addr[MAX_PAIRS];
static int g_n_start, g_n_end;
static uint64_t g_started_at;
static int g_open = -1; /* pair index of the open region, -1 if none */
static unsigned g_regions;
static FILE *g_out;
static const Block *g_prev;

static void on_start(unsigned int vcpu, void *udata) {
  (void)vcpu;
  g_started_at = g_counter;
  g_open = (int)(intptr_t)udata;
}

static void on_end(unsigned int vcpu, void *udata) {
  (void)vcpu;
  if (g_open != (int)(intptr_t)udata) {
    return;
  }
  uint64_t diff = g_counter - g_started_at;
  g_open = -1;
  g_regions++;
  fprintf(g_out, "region=%u insns=%" PRIu64 " cycles=%" PRIu64 "\n", g_regions, diff & 0xFFFFFFFFu, diff >> 32);
  fflush(g_out);
}

static void on_block(unsigned int vcpu, void *udata) {
  (void)vcpu;
  const Block *b = udata;
  const Block *p = g_prev;
  g_prev = b;
  if (p != NULL) {
    int64_t extra = settle(g_core, p, b);
    if (extra != 0) {
      g_counter += (uint64_t)extra << 32;
    }
  }
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
  (void)id;
  size_t n = qemu_plugin_tb_n_insns(tb);
  if (n == 0u) {
    return;
  }
  if (n > MAX_BLOCK) {
    n = MAX_BLOCK;
  }
  Insn d[MAX_BLOCK];
  unsigned cost[MAX_BLOCK];
  Block *blk = calloc(1, sizeof(Block)); /* lives as long as QEMU may run this translation */
  if (blk == NULL) {
    return;
  }
  for (size_t i = 0; i < n; i++) {
    struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
    uint8_t bytes[4] = {0, 0, 0, 0};
    size_t size = qemu_plugin_insn_size(insn);
    memcpy(bytes, qemu_plugin_insn_data(insn), size < 4u ? size : 4u);
    decode(bytes, size, (uint32_t)qemu_plugin_insn_vaddr(insn), &d[i]);
  }
  mark_it(d, n);
  model_block(g_core, d, n, cost, blk);
  struct qemu_plugin_insn *last = qemu_plugin_tb_get_insn(tb, n - 1u);
  blk->pc = (uint32_t)qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, 0));
  blk->last_pc = (uint32_t)qemu_plugin_insn_vaddr(last);
  blk->fallthrough = blk->last_pc + (uint32_t)qemu_plugin_insn_size(last);
  predict_m7(g_core, blk);
  qemu_plugin_register_vcpu_tb_exec_cb(tb, on_block, QEMU_PLUGIN_CB_NO_REGS, blk);
  for (size_t i = 0; i < n; i++) {
    struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
    uint64_t va = qemu_plugin_insn_vaddr(insn);
    /* Marker callbacks run before the instruction's inline add: both markers sample the counter at the same
     * point of their instruction, so a region counts [start, end). */
    for (int k = 0; k < g_n_start; k++) {
      if (va == g_end_addr[k]) {
        qemu_plugin_register_vcpu_insn_exec_cb(insn, on_end, QEMU_PLUGIN_CB_NO_REGS, (void *)(intptr_t)k);
      }
      if (va == g_start_addr[k]) {
        qemu_plugin_register_vcpu_insn_exec_cb(insn, on_start, QEMU_PLUGIN_CB_NO_REGS, (void *)(intptr_t)k);
      }
    }
    qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &g_counter,
                                               ((uint64_t)cost[i] << 32) | 1u);
  }
}

static void on_exit_cb(qemu_plugin_id_t id, void *udata) {
  (void)id;
  (void)udata;
  /* The counter's halves wrap at 2^32 over a whole run; the exit line reports them modulo 2^32. */
  fprintf(g_out, "regions=%u insns=%" PRIu64 " cycles=%" PRIu64 "%s\n", g_regions, g_counter & 0xFFFFFFFFu,
          g_counter >> 32, g_open >= 0 ? " open=1" : "");
  fflush(g_out);
}

static int fail(const char *what, const char *arg) {
  fprintf(stderr, "utvm cycles plugin: %s%s\n", what, arg);
  return 1;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv) {
  (void)info;
  g_out = stderr;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    char *end = NULL;
    if (strncmp(a, "core=", 5) == 0) {
      g_core = NULL;
      for (size_t k = 0; k < sizeof(CORES) / sizeof(CORES[0]); k++) {
        if (strcmp(a + 5, CORES[k].name) == 0) {
          g_core = &CORES[k];
        }
      }
      if (g_core == NULL) {
        return fail("unknown core (known: m4, m7, m33, m55): ", a + 5);
      }
    } else if (strncmp(a, "start=", 6) == 0 || strncmp(a, "end=", 4) == 0) {
      bool start = a[0] == 's';
      const char *v = a + (start ? 6 : 4);
      unsigned long long addr = strtoull(v, &end, 0);
      if (*v == '\0' || end == NULL || *end != '\0') {
        return fail("not an address: ", a);
      }
      if ((start ? g_n_start : g_n_end) >= MAX_PAIRS) {
        return fail("too many markers (at most 32 start/end pairs): ", a);
      }
      if (start) {
        g_start_addr[g_n_start++] = addr & ~1ull; /* a Thumb symbol's value has bit 0 set */
      } else {
        g_end_addr[g_n_end++] = addr & ~1ull;
      }
    } else if (strncmp(a, "out=", 4) == 0) {
      g_out = fopen(a + 4, "w");
      if (g_out == NULL) {
        g_out = stderr;
        return fail("cannot open the output file ", a + 4);
      }
    } else {
      return fail("unknown argument (use core=, start=, end=, out=): ", a);
    }
  }
  if (g_core == NULL) {
    return fail("missing core=m4|m7|m33|m55", "");
  }
  if (g_n_start != g_n_end) {
    return fail("start= and end= must come in pairs", "");
  }
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
  qemu_plugin_register_atexit_cb(id, on_exit_cb, NULL);
  return 0;
}

#else /* UTVM_CYCLES_SELFTEST */

/*
 * A host program over the same model, for tests. Each input line is one executed block, in execution order:
 *   <core> <address> <insn> [<insn> ...]
 * with each instruction as 4 hex digits (16-bit) or 8 (32-bit: first halfword, then second). It prints one
 * line per instruction, `<kind> <pipe> <cost>`, then `block <static cycles> end=<end> taken=<t>
 * not_taken=<nt>`, and, from the second line on, `settle <cycles>`: what running this block after the
 * previous line's adds for the previous block's end (a line `reset` forgets the previous block).
 */
static char *next_token(char **cursor) {
  char *p = *cursor;
  while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') {
    p++;
  }
  if (*p == '\0') {
    return NULL;
  }
  char *tok = p;
  while (*p != '\0' && *p != ' ' && *p != '\t' && *p != '\r' && *p != '\n') {
    p++;
  }
  if (*p != '\0') {
    *p++ = '\0';
  }
  *cursor = p;
  return tok;
}

int main(void) {
  static char line[8192];
  Block prev = {0};
  bool have_prev = false;
  while (fgets(line, sizeof(line), stdin) != NULL) {
    char *cursor = line;
    char *tok = next_token(&cursor);
    if (tok == NULL) {
      continue;
    }
    if (strcmp(tok, "reset") == 0) {
      have_prev = false;
      g_loop_le = 0;
      continue;
    }
    const Core *c = NULL;
    for (size_t k = 0; k < sizeof(CORES) / sizeof(CORES[0]); k++) {
      if (strcmp(tok, CORES[k].name) == 0) {
        c = &CORES[k];
      }
    }
    tok = next_token(&cursor);
    if (c == NULL || tok == NULL) {
      fprintf(stderr, "bad line: want <core> <address> <insn>...\n");
      return 2;
    }
    uint32_t pc = (uint32_t)strtoul(tok, NULL, 16);
    Insn d[256];
    unsigned cost[256];
    size_t n = 0;
    Block blk;
    uint32_t first_pc = pc;
    uint32_t last_pc = pc;
    while ((tok = next_token(&cursor)) != NULL && n < 256u) {
      size_t len = strlen(tok);
      uint32_t v = (uint32_t)strtoul(tok, NULL, 16);
      uint8_t bytes[4];
      if (len == 8u) {
        bytes[0] = (uint8_t)(v >> 16);
        bytes[1] = (uint8_t)(v >> 24);
        bytes[2] = (uint8_t)v;
        bytes[3] = (uint8_t)(v >> 8);
      } else {
        bytes[0] = (uint8_t)v;
        bytes[1] = (uint8_t)(v >> 8);
      }
      decode(bytes, len == 8u ? 4u : 2u, pc, &d[n]);
      last_pc = pc;
      pc += len == 8u ? 4u : 2u;
      n++;
    }
    mark_it(d, n);
    model_block(c, d, n, cost, &blk);
    blk.pc = first_pc;
    blk.last_pc = last_pc;
    blk.fallthrough = pc;
    predict_m7(c, &blk);
    unsigned total = 0;
    for (size_t i = 0; i < n; i++) {
      printf("%s %s %u\n", KIND_NAMES[d[i].kind], PIPE_NAMES[d[i].pipe], cost[i]);
      total += cost[i];
    }
    printf("block %u end=%u taken=%u not_taken=%u\n", total, blk.end, blk.taken, blk.not_taken);
    if (have_prev) {
      printf("settle %" PRId64 "\n", settle(c, &prev, &blk));
    }
    prev = blk;
    have_prev = true;
    fflush(stdout);
  }
  return 0;
}
#endif
