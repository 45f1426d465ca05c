/* utvm runtime, src/kernels/signal/rfft.h: KISS FFT's real forward transform (tools/kiss_fftr.c:
   kiss_fftr), as TFLM builds it.
   A template over the element type like cfft.h (the same three parameters, #undef'd at its end; README.md),
   instantiated after cfft.h of the same type. */

/* kiss_fftr: the real FFT of nfft = 2 * ncfft samples in `x` (already padded) into ncfft + 1 bins. */
static void SIGNAL_FN(rfft)(const SIGNAL_T* x, SIGNAL_T* y, SIGNAL_T* tmp, int32_t ncfft, const int32_t* order,
                            const int32_t* stages, int32_t nstages, const SIGNAL_T* tw, const SIGNAL_T* stw) {
  int32_t k;
  SIGNAL_T dr;
  SIGNAL_T di;
  SIGNAL_FN(cfft)(tmp, x, ncfft, order, stages, nstages, tw, 0);
  dr = SIGNAL_FN(fd)(tmp[0], 2);
  di = SIGNAL_FN(fd)(tmp[1], 2);
  y[0] = SIGNAL_FN(ad)(dr, di);
  y[2 * ncfft] = SIGNAL_FN(sb)(dr, di);
  y[1] = 0;
  y[2 * ncfft + 1] = 0;
  for (k = 1; k <= ncfft / 2; ++k) {
    const SIGNAL_T pkr = SIGNAL_FN(fd)(tmp[2 * k], 2);
    const SIGNAL_T pki = SIGNAL_FN(fd)(tmp[2 * k + 1], 2);
    const SIGNAL_T pnr = SIGNAL_FN(fd)(tmp[2 * (ncfft - k)], 2);
    const SIGNAL_T pni = SIGNAL_FN(fd)(SIGNAL_FN(ng)(tmp[2 * (ncfft - k) + 1]), 2);
    const SIGNAL_T f1r = SIGNAL_FN(ad)(pkr, pnr);
    const SIGNAL_T f1i = SIGNAL_FN(ad)(pki, pni);
    const SIGNAL_T f2r = SIGNAL_FN(sb)(pkr, pnr);
    const SIGNAL_T f2i = SIGNAL_FN(sb)(pki, pni);
    SIGNAL_T twr;
    SIGNAL_T twi;
    SIGNAL_FN(cm)(&twr, &twi, f2r, f2i, stw[2 * (k - 1)], stw[2 * (k - 1) + 1]);
    y[2 * k] = SIGNAL_FN(hf)((SIGNAL_W)f1r + (SIGNAL_W)twr);
    y[2 * k + 1] = SIGNAL_FN(hf)((SIGNAL_W)f1i + (SIGNAL_W)twi);
    y[2 * (ncfft - k)] = SIGNAL_FN(hf)((SIGNAL_W)f1r - (SIGNAL_W)twr);
    y[2 * (ncfft - k) + 1] = SIGNAL_FN(hf)((SIGNAL_W)twi - (SIGNAL_W)f1i);
  }
}

#undef SIGNAL_T
#undef SIGNAL_W
#undef SIGNAL_FN
