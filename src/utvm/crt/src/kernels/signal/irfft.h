/* utvm runtime, src/kernels/signal/irfft.h: KISS FFT's real inverse transform (tools/kiss_fftr.c:
   kiss_fftri), as TFLM builds it.
   A template over the element type like cfft.h (the same three parameters, #undef'd at its end; README.md),
   instantiated after cfft.h of the same type. */

/* kiss_fftri: ncfft + 1 bins in `x` into nfft = 2 * ncfft samples in `y` (unscaled). */
static void SIGNAL_FN(irfft)(const SIGNAL_T* x, SIGNAL_T* y, SIGNAL_T* tmp, int32_t ncfft, const int32_t* order,
                             const int32_t* stages, int32_t nstages, const SIGNAL_T* tw, const SIGNAL_T* stw) {
  int32_t k;
  tmp[0] = SIGNAL_FN(fd)(SIGNAL_FN(ad)(x[0], x[2 * ncfft]), 2);
  tmp[1] = SIGNAL_FN(fd)(SIGNAL_FN(sb)(x[0], x[2 * ncfft]), 2);
  for (k = 1; k <= ncfft / 2; ++k) {
    const SIGNAL_T fkr = SIGNAL_FN(fd)(x[2 * k], 2);
    const SIGNAL_T fki = SIGNAL_FN(fd)(x[2 * k + 1], 2);
    const SIGNAL_T fnr = SIGNAL_FN(fd)(x[2 * (ncfft - k)], 2);
    const SIGNAL_T fni = SIGNAL_FN(fd)(SIGNAL_FN(ng)(x[2 * (ncfft - k) + 1]), 2);
    const SIGNAL_T ekr = SIGNAL_FN(ad)(fkr, fnr);
    const SIGNAL_T eki = SIGNAL_FN(ad)(fki, fni);
    const SIGNAL_T tr = SIGNAL_FN(sb)(fkr, fnr);
    const SIGNAL_T ti = SIGNAL_FN(sb)(fki, fni);
    SIGNAL_T okr;
    SIGNAL_T oki;
    SIGNAL_FN(cm)(&okr, &oki, tr, ti, stw[2 * (k - 1)], stw[2 * (k - 1) + 1]);
    tmp[2 * k] = SIGNAL_FN(ad)(ekr, okr);
    tmp[2 * k + 1] = SIGNAL_FN(ad)(eki, oki);
    tmp[2 * (ncfft - k)] = SIGNAL_FN(sb)(ekr, okr);
    tmp[2 * (ncfft - k) + 1] = SIGNAL_FN(ng)(SIGNAL_FN(sb)(eki, oki));
  }
  SIGNAL_FN(cfft)(y, tmp, ncfft, order, stages, nstages, tw, 1);
}

#undef SIGNAL_T
#undef SIGNAL_W
#undef SIGNAL_FN
