/* crt_config.h for the C tests, variant "default": exactly the shipped template's defaults. */
#include "../../../../src/utvm/crt/templates/crt_config.h.template"
