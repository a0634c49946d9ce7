/* Preloaded (LD_PRELOAD) into the llama.cpp tools that the tests run, so that a tool's log is whole.

   llama.cpp's tools log through common/log.cpp: lines go to a queue that a worker thread prints, and the
   logger is a singleton that is deliberately never destroyed (log.cpp, common_log_main; llama.cpp issue
   22142). A tool that fails early (main returns 1 right after llama_model_load's error) exits while the
   thread may not yet have printed the line that says why: measured on this project's 2-core machines, the
   log of a truncated file came back empty in 7 % of idle runs and 65-80 % of runs beside two busy cores.

   At exit this joins the worker the way the tool's own common_log_pause would: the thread prints every
   queued line, then stops. It changes nothing a tool decides; it only waits for what the tool already
   wrote. The handler is registered by this library's constructor, before the tool's own, so it runs after
   them (atexit is last in, first out) and before any shared library is unloaded. Tools without
   common/log.cpp (no such symbols) are left as they are. */
#include <dlfcn.h>
#include <stdlib.h>

typedef void *(*log_main_fn)(void);
typedef void (*log_pause_fn)(void *);

static void drain_log_queue(void)
{
    /* C++ names of common_log_main() and common_log_pause(common_log *) as libllama-common exports them */
    log_main_fn log_main = (log_main_fn)dlsym(RTLD_DEFAULT, "_Z15common_log_mainv");
    log_pause_fn log_pause = (log_pause_fn)dlsym(RTLD_DEFAULT, "_Z16common_log_pauseP10common_log");
    if (log_main && log_pause)
        log_pause(log_main());
}

__attribute__((constructor)) static void register_drain(void)
{
    atexit(drain_log_queue);
}
