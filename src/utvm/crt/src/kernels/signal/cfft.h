/* utvm runtime, src/kernels/signal/cfft.h: KISS FFT's complex transform (kiss_fft.c: kf_work and the
   radix 2, 3, 4 and 5 butterflies), as TFLM builds it.
   A template: the code generator copies it verbatim into generated sources (README.md), once per element
   type, after fft_<s>.h and the definitions of its three parameters, e.g. for int16:
     #define SIGNAL_T int16_t                     the element type
     #define SIGNAL_W int32_t                     its product and sum type (W below)
     #define SIGNAL_FN(name) signal_##name##_i16  its functions: SIGNAL_FN(cfft) is signal_cfft_i16
   It #undefs them at its end, so it can be instantiated again for another type. Needs <stdint.h>. */

/* KISS FFT of n complex values (interleaved re, im): the leaves in recursion order, then the radix 2, 3, 4
   and 5 stages innermost first (stages[2k] = radix, stages[2k + 1] = sub-length). Sums of more than two
   terms are formed in W and stored once (the same bits as TFLM's wrapping int arithmetic). */
static void SIGNAL_FN(cfft)(SIGNAL_T* out, const SIGNAL_T* in, int32_t n, const int32_t* order,
                            const int32_t* stages, int32_t nstages, const SIGNAL_T* tw, int32_t inverse) {
  int32_t k;
  int32_t st;
  for (k = 0; k < n; ++k) {
    out[2 * k] = in[2 * order[k]];
    out[2 * k + 1] = in[2 * order[k] + 1];
  }
  for (st = nstages - 1; st >= 0; --st) {
    const int32_t p = stages[2 * st];
    const int32_t m = stages[2 * st + 1];
    const int32_t fstride = n / (p * m);
    int32_t base;
    for (base = 0; base < n; base += p * m) {
      SIGNAL_T* f = out + 2 * base;
      int32_t u;
      for (u = 0; u < m; ++u) {
        SIGNAL_T* f0 = f + 2 * u;
        if (p == 2) { /* kf_bfly2 */
          SIGNAL_T* f1 = f0 + 2 * m;
          SIGNAL_T tr;
          SIGNAL_T ti;
          const SIGNAL_T ar = SIGNAL_FN(fd)(f0[0], 2);
          const SIGNAL_T ai = SIGNAL_FN(fd)(f0[1], 2);
          const SIGNAL_T br = SIGNAL_FN(fd)(f1[0], 2);
          const SIGNAL_T bi = SIGNAL_FN(fd)(f1[1], 2);
          SIGNAL_FN(cm)(&tr, &ti, br, bi, tw[2 * u * fstride], tw[2 * u * fstride + 1]);
          f1[0] = SIGNAL_FN(sb)(ar, tr);
          f1[1] = SIGNAL_FN(sb)(ai, ti);
          f0[0] = SIGNAL_FN(ad)(ar, tr);
          f0[1] = SIGNAL_FN(ad)(ai, ti);
        } else if (p == 3) { /* kf_bfly3 */
          SIGNAL_T* f1 = f0 + 2 * m;
          SIGNAL_T* f2 = f0 + 4 * m;
          const SIGNAL_T e3i = tw[2 * fstride * m + 1];
          SIGNAL_T s0r, s0i, s1r, s1i, s2r, s2i, s3r, s3i, g1r, g1i;
          const SIGNAL_T x0r = SIGNAL_FN(fd)(f0[0], 3);
          const SIGNAL_T x0i = SIGNAL_FN(fd)(f0[1], 3);
          const SIGNAL_T x1r = SIGNAL_FN(fd)(f1[0], 3);
          const SIGNAL_T x1i = SIGNAL_FN(fd)(f1[1], 3);
          const SIGNAL_T x2r = SIGNAL_FN(fd)(f2[0], 3);
          const SIGNAL_T x2i = SIGNAL_FN(fd)(f2[1], 3);
          SIGNAL_FN(cm)(&s1r, &s1i, x1r, x1i, tw[2 * u * fstride], tw[2 * u * fstride + 1]);
          SIGNAL_FN(cm)(&s2r, &s2i, x2r, x2i, tw[4 * u * fstride], tw[4 * u * fstride + 1]);
          s3r = SIGNAL_FN(ad)(s1r, s2r);
          s3i = SIGNAL_FN(ad)(s1i, s2i);
          s0r = SIGNAL_FN(sb)(s1r, s2r);
          s0i = SIGNAL_FN(sb)(s1i, s2i);
          g1r = (SIGNAL_T)((SIGNAL_W)x0r - SIGNAL_FN(hv)(s3r));
          g1i = (SIGNAL_T)((SIGNAL_W)x0i - SIGNAL_FN(hv)(s3i));
          s0r = SIGNAL_FN(sm)(s0r, e3i);
          s0i = SIGNAL_FN(sm)(s0i, e3i);
          f0[0] = SIGNAL_FN(ad)(x0r, s3r);
          f0[1] = SIGNAL_FN(ad)(x0i, s3i);
          f2[0] = SIGNAL_FN(ad)(g1r, s0i);
          f2[1] = SIGNAL_FN(sb)(g1i, s0r);
          f1[0] = SIGNAL_FN(sb)(g1r, s0i);
          f1[1] = SIGNAL_FN(ad)(g1i, s0r);
        } else if (p == 5) { /* kf_bfly5 */
          SIGNAL_T* f1 = f0 + 2 * m;
          SIGNAL_T* f2 = f0 + 4 * m;
          SIGNAL_T* f3 = f0 + 6 * m;
          SIGNAL_T* f4 = f0 + 8 * m;
          const SIGNAL_T yar = tw[2 * fstride * m];
          const SIGNAL_T yai = tw[2 * fstride * m + 1];
          const SIGNAL_T ybr = tw[4 * fstride * m];
          const SIGNAL_T ybi = tw[4 * fstride * m + 1];
          SIGNAL_T s1r, s1i, s2r, s2i, s3r, s3i, s4r, s4i, s5r, s5i, s6r, s6i;
          SIGNAL_T s7r, s7i, s8r, s8i, s9r, s9i, s10r, s10i, s11r, s11i, s12r, s12i;
          const SIGNAL_T x0r = SIGNAL_FN(fd)(f0[0], 5);
          const SIGNAL_T x0i = SIGNAL_FN(fd)(f0[1], 5);
          const SIGNAL_T x1r = SIGNAL_FN(fd)(f1[0], 5);
          const SIGNAL_T x1i = SIGNAL_FN(fd)(f1[1], 5);
          const SIGNAL_T x2r = SIGNAL_FN(fd)(f2[0], 5);
          const SIGNAL_T x2i = SIGNAL_FN(fd)(f2[1], 5);
          const SIGNAL_T x3r = SIGNAL_FN(fd)(f3[0], 5);
          const SIGNAL_T x3i = SIGNAL_FN(fd)(f3[1], 5);
          const SIGNAL_T x4r = SIGNAL_FN(fd)(f4[0], 5);
          const SIGNAL_T x4i = SIGNAL_FN(fd)(f4[1], 5);
          SIGNAL_FN(cm)(&s1r, &s1i, x1r, x1i, tw[2 * u * fstride], tw[2 * u * fstride + 1]);
          SIGNAL_FN(cm)(&s2r, &s2i, x2r, x2i, tw[4 * u * fstride], tw[4 * u * fstride + 1]);
          SIGNAL_FN(cm)(&s3r, &s3i, x3r, x3i, tw[6 * u * fstride], tw[6 * u * fstride + 1]);
          SIGNAL_FN(cm)(&s4r, &s4i, x4r, x4i, tw[8 * u * fstride], tw[8 * u * fstride + 1]);
          s7r = SIGNAL_FN(ad)(s1r, s4r);
          s7i = SIGNAL_FN(ad)(s1i, s4i);
          s10r = SIGNAL_FN(sb)(s1r, s4r);
          s10i = SIGNAL_FN(sb)(s1i, s4i);
          s8r = SIGNAL_FN(ad)(s2r, s3r);
          s8i = SIGNAL_FN(ad)(s2i, s3i);
          s9r = SIGNAL_FN(sb)(s2r, s3r);
          s9i = SIGNAL_FN(sb)(s2i, s3i);
          f0[0] = (SIGNAL_T)((SIGNAL_W)x0r + (SIGNAL_W)s7r + (SIGNAL_W)s8r);
          f0[1] = (SIGNAL_T)((SIGNAL_W)x0i + (SIGNAL_W)s7i + (SIGNAL_W)s8i);
          s5r = (SIGNAL_T)((SIGNAL_W)x0r + (SIGNAL_W)SIGNAL_FN(sm)(s7r, yar) + (SIGNAL_W)SIGNAL_FN(sm)(s8r, ybr));
          s5i = (SIGNAL_T)((SIGNAL_W)x0i + (SIGNAL_W)SIGNAL_FN(sm)(s7i, yar) + (SIGNAL_W)SIGNAL_FN(sm)(s8i, ybr));
          s6r = (SIGNAL_T)((SIGNAL_W)SIGNAL_FN(sm)(s10i, yai) + (SIGNAL_W)SIGNAL_FN(sm)(s9i, ybi));
          s6i = (SIGNAL_T)(-(SIGNAL_W)SIGNAL_FN(sm)(s10r, yai) - (SIGNAL_W)SIGNAL_FN(sm)(s9r, ybi));
          f1[0] = SIGNAL_FN(sb)(s5r, s6r);
          f1[1] = SIGNAL_FN(sb)(s5i, s6i);
          f4[0] = SIGNAL_FN(ad)(s5r, s6r);
          f4[1] = SIGNAL_FN(ad)(s5i, s6i);
          s11r = (SIGNAL_T)((SIGNAL_W)x0r + (SIGNAL_W)SIGNAL_FN(sm)(s7r, ybr) + (SIGNAL_W)SIGNAL_FN(sm)(s8r, yar));
          s11i = (SIGNAL_T)((SIGNAL_W)x0i + (SIGNAL_W)SIGNAL_FN(sm)(s7i, ybr) + (SIGNAL_W)SIGNAL_FN(sm)(s8i, yar));
          s12r = (SIGNAL_T)(-(SIGNAL_W)SIGNAL_FN(sm)(s10i, ybi) + (SIGNAL_W)SIGNAL_FN(sm)(s9i, yai));
          s12i = (SIGNAL_T)((SIGNAL_W)SIGNAL_FN(sm)(s10r, ybi) - (SIGNAL_W)SIGNAL_FN(sm)(s9r, yai));
          f2[0] = SIGNAL_FN(ad)(s11r, s12r);
          f2[1] = SIGNAL_FN(ad)(s11i, s12i);
          f3[0] = SIGNAL_FN(sb)(s11r, s12r);
          f3[1] = SIGNAL_FN(sb)(s11i, s12i);
        } else { /* p == 4: kf_bfly4 */
          SIGNAL_T* f1 = f0 + 2 * m;
          SIGNAL_T* f2 = f0 + 4 * m;
          SIGNAL_T* f3 = f0 + 6 * m;
          SIGNAL_T s0r, s0i, s1r, s1i, s2r, s2i, s3r, s3i, s4r, s4i, s5r, s5i, a0r, a0i;
          const SIGNAL_T x0r = SIGNAL_FN(fd)(f0[0], 4);
          const SIGNAL_T x0i = SIGNAL_FN(fd)(f0[1], 4);
          const SIGNAL_T x1r = SIGNAL_FN(fd)(f1[0], 4);
          const SIGNAL_T x1i = SIGNAL_FN(fd)(f1[1], 4);
          const SIGNAL_T x2r = SIGNAL_FN(fd)(f2[0], 4);
          const SIGNAL_T x2i = SIGNAL_FN(fd)(f2[1], 4);
          const SIGNAL_T x3r = SIGNAL_FN(fd)(f3[0], 4);
          const SIGNAL_T x3i = SIGNAL_FN(fd)(f3[1], 4);
          SIGNAL_FN(cm)(&s0r, &s0i, x1r, x1i, tw[2 * u * fstride], tw[2 * u * fstride + 1]);
          SIGNAL_FN(cm)(&s1r, &s1i, x2r, x2i, tw[4 * u * fstride], tw[4 * u * fstride + 1]);
          SIGNAL_FN(cm)(&s2r, &s2i, x3r, x3i, tw[6 * u * fstride], tw[6 * u * fstride + 1]);
          s5r = SIGNAL_FN(sb)(x0r, s1r);
          s5i = SIGNAL_FN(sb)(x0i, s1i);
          a0r = SIGNAL_FN(ad)(x0r, s1r);
          a0i = SIGNAL_FN(ad)(x0i, s1i);
          s3r = SIGNAL_FN(ad)(s0r, s2r);
          s3i = SIGNAL_FN(ad)(s0i, s2i);
          s4r = SIGNAL_FN(sb)(s0r, s2r);
          s4i = SIGNAL_FN(sb)(s0i, s2i);
          f2[0] = SIGNAL_FN(sb)(a0r, s3r);
          f2[1] = SIGNAL_FN(sb)(a0i, s3i);
          f0[0] = SIGNAL_FN(ad)(a0r, s3r);
          f0[1] = SIGNAL_FN(ad)(a0i, s3i);
          if (inverse) {
            f1[0] = SIGNAL_FN(sb)(s5r, s4i);
            f1[1] = SIGNAL_FN(ad)(s5i, s4r);
            f3[0] = SIGNAL_FN(ad)(s5r, s4i);
            f3[1] = SIGNAL_FN(sb)(s5i, s4r);
          } else {
            f1[0] = SIGNAL_FN(ad)(s5r, s4i);
            f1[1] = SIGNAL_FN(sb)(s5i, s4r);
            f3[0] = SIGNAL_FN(sb)(s5r, s4i);
            f3[1] = SIGNAL_FN(ad)(s5i, s4r);
          }
        }
      }
    }
  }
}

#undef SIGNAL_T
#undef SIGNAL_W
#undef SIGNAL_FN
