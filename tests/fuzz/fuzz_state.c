/* fuzz_state.c: libFuzzer harness for a checkpoint's .state file (the
 * trainer's resume record). Initialization makes a trainer (a tiny policy,
 * one small graph, the slow two-device cluster) and saves it to T.ckpt and
 * T.ckpt.state; each input replaces T.ckpt.state, then
 * gopt_trainer_checkpoint_tasks (what `optimize --method go` reads) and
 * gopt_trainer_load into a fresh trainer (what `train --resume` does) run on
 * it. A resumed trainer must decode and simulate its graph. With
 * FUZZ_WRITE_SEEDS=DIR set, the saved state is copied into DIR. Corpus:
 * corpus/state/. */
#include "fuzz_common.h"
#include "gopt_policy.h"
#include "gopt_trainer.h"

static gopt_policy *POL;
static const char *PATH, *STATE;

static gopt_graph *make_graph(void) {
    gopt_graph *g = NULL;
    gopt_error err = {0};
    FUZZ_REQUIRE(!gopt_graph_create(&g, "state graph", "fuzz", &err), "%s", err.msg);
    for (int i = 0; i < 4; i++) {
        char name[8];
        snprintf(name, sizeof name, "n%d", i);
        gopt_node_attrs a = {name, "Op", i ? GOPT_OP_CLASS_ELEMENTWISE : GOPT_OP_CLASS_INPUT, 10.0 * i, 64, 0, "", "",
                             GOPT_PHASE_FWD, i, ""};
        FUZZ_REQUIRE(!gopt_graph_add_node(g, &a, NULL, &err), "%s", err.msg);
    }
    for (int i = 1; i < 4; i++) FUZZ_REQUIRE(!gopt_graph_add_edge(g, i - 1, i, 64, &err), "%s", err.msg);
    FUZZ_REQUIRE(!gopt_graph_finalize(g, &err), "%s", err.msg);
    return g;
}

static gopt_trainer *make_trainer(void) {
    gopt_trainer_options o;
    gopt_trainer_options_default(&o);
    o.samples = 2;
    o.epochs = 1;
    o.sim_threads = 1;
    gopt_trainer *t = NULL;
    gopt_error err = {0};
    FUZZ_REQUIRE(!gopt_trainer_create(&t, POL, fuzz_slow_cluster(), &o, &err), "%s", err.msg);
    FUZZ_REQUIRE(!gopt_trainer_add_graph(t, make_graph(), 10.0, &err), "%s", err.msg);
    return t;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    gopt_error err = {0};
    gopt_policy_config cfg = {4, 1, 1, 2, 4, 1, 2, 4, 2, 0, 4, 0, 0, 0, 0, 1, 0, 0, 0};
    FUZZ_REQUIRE(!gopt_policy_create(&POL, &cfg, 7, &err), "%s", err.msg);
    PATH = fuzz_path("T.ckpt");
    STATE = fuzz_path("T.ckpt.state");
    gopt_trainer *t = make_trainer();
    FUZZ_REQUIRE(!gopt_trainer_save(t, PATH, &err), "%s", err.msg);
    gopt_trainer_free(t);
    const char *seeds = getenv("FUZZ_WRITE_SEEDS");
    if (seeds && seeds[0]) {
        char *text = NULL, path[512];
        size_t len = 0;
        FUZZ_REQUIRE(!gopt_file_read_all(STATE, &text, &len, &err), "%s", err.msg);
        snprintf(path, sizeof path, "%s/valid.state", seeds);
        fuzz_write(path, (const uint8_t *)text, len);
        free(text);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_write(STATE, data, size);
    gopt_error err = {0};
    unsigned tasks = 0;
    gopt_status st = gopt_trainer_checkpoint_tasks(PATH, &tasks, &err);
    if (st != GOPT_OK) {
        FUZZ_REQUIRE(gopt_status_exit_code(st) == 2 || st == GOPT_ENOMEM, "status %d: %s", st, err.msg);
        FUZZ_REQUIRE(strstr(err.msg, "T.ckpt.state"), "the message does not name the .state file: %s", err.msg);
    }
    gopt_trainer *t = make_trainer();
    st = gopt_trainer_load(t, PATH, &err);
    if (st != GOPT_OK) {
        FUZZ_REQUIRE(gopt_status_exit_code(st) == 2 || st == GOPT_ENOMEM, "status %d: %s", st, err.msg);
        FUZZ_REQUIRE(strstr(err.msg, "T.ckpt"), "the message does not name the checkpoint: %s", err.msg);
    } else {
        gopt_decisions d;
        gopt_sim_result r;
        FUZZ_REQUIRE(!gopt_decisions_init(&d, 4, &err), "%s", err.msg);
        st = gopt_trainer_greedy(t, 0, &d, &r, &err);
        FUZZ_REQUIRE(st == GOPT_OK, "a resumed trainer cannot decode: %s", err.msg);
        FUZZ_REQUIRE(isfinite(r.step_time_s), "step time %g", r.step_time_s);
        gopt_decisions_destroy(&d);
    }
    gopt_trainer_free(t);
    return 0;
}
