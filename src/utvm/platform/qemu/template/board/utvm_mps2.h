/*
 * utvm_mps2.h -- the few registers of the Arm MPS2 FPGA images (AN385/AN386/AN500) that utvm firmware uses:
 * the System Control Block, SysTick and the CMSDK APB UART0. Written from the Armv7-M Architecture Reference
 * Manual and the CMSDK technical reference; no vendor header is needed.
 */
#ifndef UTVM_MPS2_H_
#define UTVM_MPS2_H_

#include <stdint.h>

#define UTVM_REG32(addr) (*(volatile uint32_t*)(uintptr_t)(addr))

/* --- System Control Block (Armv7-M ARM, B3.2) --------------------------------------------------------- */
#define UTVM_SCB_VTOR UTVM_REG32(0xE000ED08u)  /*!< vector table offset */
#define UTVM_SCB_AIRCR UTVM_REG32(0xE000ED0Cu) /*!< application interrupt and reset control */
#define UTVM_SCB_SHPR3 UTVM_REG32(0xE000ED20u) /*!< system handler priorities 12-15 (SysTick = bits 31:24) */
#define UTVM_SCB_CPACR UTVM_REG32(0xE000ED88u) /*!< coprocessor access control (CP10/CP11 = FPU) */
#define UTVM_AIRCR_VECTKEY (0x05FAu << 16)
#define UTVM_AIRCR_SYSRESETREQ (1u << 2)

/* --- SysTick (Armv7-M ARM, B3.3) ---------------------------------------------------------------------- */
#define UTVM_SYST_CSR UTVM_REG32(0xE000E010u) /*!< control and status */
#define UTVM_SYST_RVR UTVM_REG32(0xE000E014u) /*!< reload value (24 bits) */
#define UTVM_SYST_CVR UTVM_REG32(0xE000E018u) /*!< current value; any write clears it */
#define UTVM_SYST_CSR_ENABLE (1u << 0)
#define UTVM_SYST_CSR_TICKINT (1u << 1)
#define UTVM_SYST_CSR_CLKSOURCE (1u << 2) /*!< 1 = processor clock */
#define UTVM_SYST_CSR_COUNTFLAG (1u << 16)
#define UTVM_SYST_MAX_RELOAD 0x00FFFFFFu

/*! The MPS2 images clock the processor (and so SysTick with CLKSOURCE=1) at 25 MHz. Another board that reuses
 *  the architectural registers here (the serial-board platform) defines its own clock on the command line. */
#ifndef UTVM_CPU_CLOCK_HZ
#define UTVM_CPU_CLOCK_HZ 25000000u
#endif

/* --- CMSDK APB UART0 ---------------------------------------------------------------------------------- */
#define UTVM_UART0_BASE 0x40004000u
#define UTVM_UART_DATA UTVM_REG32(UTVM_UART0_BASE + 0x00u)
#define UTVM_UART_STATE UTVM_REG32(UTVM_UART0_BASE + 0x04u)
#define UTVM_UART_CTRL UTVM_REG32(UTVM_UART0_BASE + 0x08u)
#define UTVM_UART_INTSTATUS UTVM_REG32(UTVM_UART0_BASE + 0x0Cu)
#define UTVM_UART_BAUDDIV UTVM_REG32(UTVM_UART0_BASE + 0x10u)
#define UTVM_UART_STATE_TXFULL (1u << 0)
#define UTVM_UART_STATE_RXFULL (1u << 1)
#define UTVM_UART_STATE_TXOVR (1u << 2)
#define UTVM_UART_STATE_RXOVR (1u << 3)
#define UTVM_UART_CTRL_TXEN (1u << 0)
#define UTVM_UART_CTRL_RXEN (1u << 1)
#define UTVM_UART_CTRL_RXINTEN (1u << 3)
#define UTVM_UART_INT_RX (1u << 1)
/*! UART0's receive interrupt line on the MPS2 images (external interrupt 0). */
#define UTVM_UART0_RX_IRQ 0u

/* --- NVIC (Armv7-M ARM, B3.4) ------------------------------------------------------------------------- */
#define UTVM_NVIC_ISER0 UTVM_REG32(0xE000E100u) /*!< set-enable, interrupts 0-31 */
#define UTVM_NVIC_ICER0 UTVM_REG32(0xE000E180u) /*!< clear-enable, interrupts 0-31 */
#define UTVM_NVIC_ICPR0 UTVM_REG32(0xE000E280u) /*!< clear-pending, interrupts 0-31 */

#endif /* UTVM_MPS2_H_ */
