/*
 * runtime_int.h: private to src/runtime (and the tests of its insides): the runtime handle's
 * fields, where models, tools, memory and the loop meet.
 */
#ifndef VG_RUNTIME_INT_H
#define VG_RUNTIME_INT_H

#include "loop/loop.h"
#include "runtime/runtime.h"

struct vg_model;
struct vg_config;
struct vg_memory_loop;
struct vg_mcp_set;
struct vg_manifest_tools;
struct vg_compactor;

struct vigil_runtime {
    struct vg_env env;    /* ports handed to every module */
    vigil_notify_cb hook; /* the embedding program's notification hook, or NULL */
    void *hook_user;
    vigil_wake_context_fn wake_context; /* the host's context for a wake's input, or NULL */
    void *wake_context_user;
    char *config_path;          /* owned; NULL: the default config location */
    struct vg_clock *own_clock; /* owned: the program's vigil_clock as the clock port, or NULL */
    char *store_uri;            /* owned: the store as opened (a file path or a postgres:// URI) */
    char *data_dir; /* owned: the folder of a SQLite store's file (NULL: none, e.g. PostgreSQL) */
    struct vg_config *config;                /* owned; loaded on first use */
    struct vg_model *model;                  /* owned; built from config on first use */
    const struct vg_loop_executor *executor; /* the tools agents may call; NULL: none yet */
    struct vg_loop_executor loop_exec;       /* the gated executor behind executor */
    struct vg_tool_executor *tools;          /* src/tool: created on first use, freed on close */
    struct vg_memory_loop *memory;           /* src/memory for the loop: created on first use */
    struct vg_loop_memory loop_memory;       /* the loop's view of it */
    /* Declared tool sources (tool_sources.c): what rt->tools serves of them, kept in step
     * with the agents' manifests while the runtime lives. */
    struct vg_mcp_set *mcp_servers;          /* owned set; its providers are rt->tools' */
    struct vg_manifest_tools *command_tools; /* likewise */
    json_t *sources_served;                  /* {"mcp_servers": {...}, "command_tools": {...}} */
    json_t *sources_seen;    /* agent id -> {mcp_servers, command_tools} as last checked */
    json_t *sources_clashes; /* the same keys: name -> {message, builtin}, served to no agent */
    json_t *sources_said;    /* "server name: why" of manifest servers left out, said once */
    int sources_busy;        /* a sync is under way (on another fiber): the others go on */
    int in_daemon;           /* opened by the daemon's host: its stderr is the daemon's log, so MCP
                              * servers' stderr goes there; elsewhere (a command at a terminal) it is
                              * quoted only when a server fails */
    int events_started;      /* this runtime appended to the event log (events_api.c) */
    int judge_state;         /* judge.c: 0 not looked at yet, 1 no judge model, 2 one configured */
    /* vigil_task_counts' last answer and the store's marks of task and wake_run records it was
     * counted under (orch_api.c); kept_counts_valid 0: count again. */
    int kept_counts_valid;
    int64_t kept_counts[VIGIL_TASK_STATUSES];
    struct vg_store_change_mark kept_counts_marks[2];
    int64_t retention_last_ms;      /* the daemon's last prune (retention.c), 0: none yet */
    struct vg_compactor *compactor; /* compactor.c: started by the first pass asked for */
    /* vigil_runtime_defer_upkeep (chat.c): turns leave their upkeep for vigil_runtime_upkeep;
     * what the one waiting owes (due 0: none waits). */
    int upkeep_deferred;
    struct {
        int due;
        int check; /* its run began: its thread's compaction check is owed */
        int ask;   /* the turn succeeded: the compactor is to be asked for a pass */
        int64_t context_tokens;
        char agent_id[256], thread_id[256];
    } upkeep;
};

/* The dispatcher's judge (judge.c): env.task_judge_* set on rt. */
void vg_runtime_judge_wire(vigil_runtime *rt);

/* The config's sandbox section (new), its root defaulting to data_dir/sandbox: the working
 * folders of execute_code live beside the store (sandbox_api.c). */
json_t *vg_runtime_sandbox_config(vigil_runtime *rt);
/* For a view of a run that reads running: when the process holding the agent's lease ran on
 * this host and is gone, nobody runs it; the next `vigil serve` or `vigil wake` recovers it
 * (trials G2, G9). Sets "holder_gone": true and "holder_pid" on obj. Reads only. */
vigil_code vg_runtime_note_gone_holder(vigil_runtime *rt, const char *agent_id, json_t *obj,
                                       vigil_error *err);

#endif
