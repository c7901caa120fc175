/* rf-bench-exit0: a command that exits 0 and nothing else, with no libc: no
 * dynamic loader, no relocations and no CPU probing at start-up. rf_api_bench
 * runs it beside `true` to show what a call costs beyond its command. */
void _start(void) { __asm__ volatile("mov $60, %eax\n\txor %edi, %edi\n\tsyscall"); }
