/*
 * utvm_mps2.h -- the few registers of the Arm MPS2/MPS3 FPGA images (AN385/AN386/AN500/AN505/AN547) that utvm
 * firmware uses: the System Control Block, SysTick, the NVIC and the CMSDK APB UART0. Written from the Armv7-M and
 * Armv8-M Architecture Reference Manuals and the CMSDK technical reference; no vendor header is needed.
 * Where the images differ (UART0's address and interrupt, the clock) the defaults here are the AN385's, and
 * the project's board definitions (project.mk's BOARD_DEFINES, boards.py) override them.
 */
#ifndef UTVM_MPS2_H_
#define UTVM_MPS2_H_

#include <stdint.h>

#define UTVM_REG32(addr) (*(volatile uint32_t*)(uintptr_t)(addr))

/* --- System Control Block (Armv7-M ARM, B3.2) --------------------------------------------------------- */
#define UTVM_SCB_VTOR UTVM_REG32(0xE000ED08u)  /*!< vector table offset */
#define UTVM_SCB_AIRCR UTVM_REG32(0xE000ED0Cu) /*!< application interrupt and reset control */
#define UTVM_SCB_SHPR3 UTVM_REG32(0xE000ED20u) /*!< system handler priorities 12-15 (SysTick = bits 31:24) */
#define UTVM_SCB_CPACR UTVM_REG32(0xE000ED88u) /*!< coprocessor access control (CP10/CP11 = FPU and MVE) */
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

/*! The AN385/AN386/AN500 images clock the processor (and so SysTick with CLKSOURCE=1) at 25 MHz, the AN505 at
 *  20 MHz, the AN547 at 32 MHz. Another board that reuses the architectural registers here (the serial-board
 *  platform) defines its own clock on the command line. */
#ifndef UTVM_CPU_CLOCK_HZ
#define UTVM_CPU_CLOCK_HZ 25000000u
#endif

/* --- CMSDK APB UART0 ---------------------------------------------------------------------------------- */
/*! 0x40004000 on the AN385/AN386/AN500; 0x50200000 on the AN505 (the Secure alias of 0x40200000); 0x59303000
 *  on the AN547 (the Secure alias of 0x49303000). */
#ifndef UTVM_UART0_BASE
#define UTVM_UART0_BASE 0x40004000u
#endif
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
/*! UART0's receive interrupt: external interrupt 0 on the AN385/AN386/AN500; 32 on the AN505, whose
 *  subsystem keeps the first 32 for itself (the FPGA's expansion interrupt 0); 33 on the AN547 (expansion
 *  interrupt 1). */
#ifndef UTVM_UART0_RX_IRQ
#define UTVM_UART0_RX_IRQ 0u
#endif

/* --- NVIC (Armv7-M ARM, B3.4): one bit per external interrupt, 32 to a register ------------------------- */
#define UTVM_NVIC_ISER(irq) UTVM_REG32(0xE000E100u + 4u * ((irq) / 32u)) /*!< set-enable */
#define UTVM_NVIC_ICER(irq) UTVM_REG32(0xE000E180u + 4u * ((irq) / 32u)) /*!< clear-enable */
#define UTVM_NVIC_ICPR(irq) UTVM_REG32(0xE000E280u + 4u * ((irq) / 32u)) /*!< clear-pending */
#define UTVM_NVIC_BIT(irq) (1u << ((irq) % 32u))
#define UTVM_NVIC_ISER0 UTVM_NVIC_ISER(0u) /*!< set-enable, interrupts 0-31 */
#define UTVM_NVIC_ICER0 UTVM_NVIC_ICER(0u) /*!< clear-enable, interrupts 0-31 */
#define UTVM_NVIC_ICPR0 UTVM_NVIC_ICPR(0u) /*!< clear-pending, interrupts 0-31 */

#endif /* UTVM_MPS2_H_ */
