/*
 * wake_runners_auto.c: compiled into vigil-test, the test build of the command (CMakeLists.txt):
 * it gives the command the tests' wake runners (wake_runners.h) before main runs, so the shell
 * tests can serve with VIGIL_WAKE_RUNNER=test:... while the product command knows only the
 * agent loop.
 */
#include "base/common.h"

#include "helpers/wake_runners.h"

__attribute__((constructor)) static void provide_test_runners(void)
{
    test_wake_runners_provide();
}
