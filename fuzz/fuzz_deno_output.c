/*
 * fuzz_deno_output.c: arbitrary bytes as what a Deno child printed before it ended without a
 * result (the program's own output, then deno's): vg_deno_classify_end reads them for a parse
 * error, V8 out of memory, a runtime's crash report or an error line, and must keep its promises
 * whatever they hold: the code stays one of the execute_code codes and the message one line,
 * NUL-terminated within its buffer. Seeds: fuzz/corpus/deno_output/.
 */
#include "base/common.h"

#include "sandbox/deno.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct vg_code_result r;
    memset(&r, 0, sizeof r);
    snprintf(r.error_code, sizeof r.error_code, "runtime_error");
    snprintf(r.error_message, sizeof r.error_message,
             "the program ended without a result (exit status 1)");
    r.output = malloc(size + 1);
    if (!r.output)
        return 0;
    memcpy(r.output, data, size);
    r.output[size] = 0;
    r.output_len = size;
    vg_deno_classify_end(&r);
    /* A runtime's crash report names a cap it hit: process_limit, fd_limit (trial E13). */
    static const char *const codes[] = {"runtime_error", "syntax_error", "memory_limit",
                                        "process_limit", "fd_limit"};
    int known = 0;
    for (size_t i = 0; i < VG_ARRAY_LEN(codes); i++)
        known |= !strcmp(r.error_code, codes[i]);
    if (r.ok || !known || !memchr(r.error_message, 0, sizeof r.error_message) ||
        strchr(r.error_message, '\n'))
        abort();
    free(r.output);
    return 0;
}
