/* bench/train.c: speed of the PPO trainer.
 *
 *   bench_train [nodes [samples [epochs [finetune_seconds [hidden [old_path [ppo_steps]]]]]]]
 *   defaults: 10000 nodes, K = 16, 4 epochs, 60 s, the policy's default width,
 *   old_path 1 (0 skips the --backward rounds comparison, which costs ~K steps),
 *   ppo_steps 3
 *
 * 1. PPO steps (K samples, E epochs; ppo_steps of them in a row, best and
 *    median) on a synthetic training-step graph of `nodes` nodes on the 8
 *    V100s of a DGX-1-like cluster (datasheet profile built in, so the bench
 *    needs no file): wall and CPU time, with the reference costs measured in
 *    the same run (one network forward, one forward + backward, one
 *    simulation), so the ratio says how many forward+backward passes a step
 *    costs. Target: < 0.6 s for 10k nodes (issue 16).
 * 2. Fine-tuning on a held-out graph of the same size (another seed) from a
 *    policy warm-started on the first graph (imitation of the best baseline,
 *    then the PPO step above): PPO steps until the time budget, printing the
 *    time at which the best step time found came within 1% of its final
 *    value. Target: final quality in < 60 s.
 * Between them, the PPO step training the heads only (--train heads, the trunk
 * reused) on the first graph, and its ratio to the whole network's step.
 * OPENBLAS_NUM_THREADS=1 is recommended on a shared machine.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "gopt_trainer.h"
#include "gopt_zoo.h"

/* CPU seconds of this process (all threads): on a loaded machine this says
 * what the work costs when wall time is inflated by others. */
static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* 8 x V100-SXM2 (datasheet: 15.7 TFLOP/s fp32, 900 GB/s, 16 GB), NVLink-like uniform links. */
static const char *PROFILE =
    "{\"format\":\"gopt-profile\",\"version\":1,\"name\":\"bench-v100x8\",\"provenance\":{\"source\":\"datasheet\","
    "\"reference\":\"NVIDIA V100 datasheet\"},\"devices\":[{\"name\":\"gpu\",\"count\":8,\"kind\":\"gpu\","
    "\"model\":\"V100-SXM2-16GB\",\"memory_bytes\":17179869184,\"peak_flops\":{\"fp32\":1.57e13},"
    "\"memory_bandwidth\":9e11,\"launch_overhead\":5e-6}],\"topology\":{\"kind\":\"uniform\",\"bandwidth\":2.5e10,"
    "\"latency\":1e-5}}";

#define CHECK(x)                                                                                                     \
    do {                                                                                                             \
        if ((x) != GOPT_OK) {                                                                                        \
            fprintf(stderr, "bench_train: %s (line %d)\n", err.msg, __LINE__);                                      \
            return 1;                                                                                                \
        }                                                                                                            \
    } while (0)

static gopt_graph *synth(int nodes, uint64_t seed, const char *name, gopt_error *err) {
    gopt_rng rng;
    gopt_rng_seed(&rng, seed);
    gopt_synth_opts so = {GOPT_SYNTH_LAYERED, nodes, nodes / 2, nodes * 2, 0};
    gopt_graph *g = NULL;
    if (gopt_zoo_synthetic(&rng, &so, name, &g, err)) return NULL;
    return g;
}

/* A trainer with options o on a synthetic graph of `nodes` nodes (seed, name; its reference ref,
 * 0: computed). */
static gopt_status trainer_on_synth(gopt_policy *pol, const gopt_costmodel *cm, const gopt_trainer_options *o, int nodes,
                                    uint64_t seed, const char *name, double ref, gopt_trainer **out, gopt_error *err) {
    gopt_trainer *t = NULL;
    gopt_status st = gopt_trainer_create(&t, pol, cm, o, err);
    if (st) return st;
    gopt_graph *g = synth(nodes, seed, name, err);
    if (!g) st = GOPT_EINVAL;
    if (!st) st = gopt_trainer_add_graph(t, g, ref, err);
    if (st) {
        gopt_trainer_free(t);
        return st;
    }
    *out = t;
    return GOPT_OK;
}

/* R PPO steps of trainer t in a row: each one's wall and CPU seconds in tw, tc; st: the last's. */
static gopt_status timed_steps(gopt_trainer *t, int R, double *tw, double *tc, gopt_trainer_stats *st,
                               gopt_error *err) {
    for (int r = 0; r < R; r++) {
        const double t0 = gopt_now_seconds(), c0 = cpu_seconds();
        gopt_status s = gopt_trainer_step(t, st, err);
        if (s) return s;
        tw[r] = gopt_now_seconds() - t0;
        tc[r] = cpu_seconds() - c0;
    }
    return GOPT_OK;
}

int main(int argc, char **argv) {
    int nodes = argc > 1 ? atoi(argv[1]) : 10000, K = argc > 2 ? atoi(argv[2]) : 16, E = argc > 3 ? atoi(argv[3]) : 4;
    double ft_budget = argc > 4 ? atof(argv[4]) : 60.0;
    int hidden = argc > 5 ? atoi(argv[5]) : 0;
    int old_path = argc > 6 ? atoi(argv[6]) : 1;
    int R = argc > 7 ? atoi(argv[7]) : 3;
    if (nodes < 50 || K < 2 || E < 1 || !(ft_budget >= 0) || R < 1 || R > 64) {
        fprintf(stderr, "usage: bench_train [nodes>=50 [samples>=2 [epochs>=1 [finetune_seconds [hidden "
                        "[old_path 0|1 [ppo_steps 1..64]]]]]]]\n");
        return 2;
    }
    gopt_error err = {0};
    gopt_profile *prof = NULL;
    gopt_costmodel *cm = NULL;
    gopt_policy *pol = NULL;
    gopt_trainer *tr = NULL;
    CHECK(gopt_profile_parse(PROFILE, strlen(PROFILE), "bench", &prof, &err));
    CHECK(gopt_cost_create(prof, 0, &cm, &err));
    gopt_policy_config pc;
    gopt_policy_config_default(&pc);
    pc.max_devices = 8;
    if (hidden > 0) pc.hidden = hidden;
    CHECK(gopt_policy_create(&pol, &pc, 1, &err));
    bench_policy_device(pol);
    printf("network on: %s\n", gopt_policy_device(pol));
    gopt_trainer_options o;
    gopt_trainer_options_default(&o);
    o.samples = K;
    o.epochs = E;
    o.imitate_steps = 20;
    o.reference = "expert,heft,heft+cp+xla";
    CHECK(gopt_trainer_create(&tr, pol, cm, &o, &err));
    gopt_graph *g = synth(nodes, 1, "bench_a", &err);
    if (!g) CHECK(GOPT_EINVAL);
    int n = gopt_graph_num_nodes(g);
    double t0 = gopt_now_seconds();
    CHECK(gopt_trainer_add_graph(tr, g, 0, &err));
    double t_ref = gopt_now_seconds() - t0;
    const char *m;
    double ref = gopt_trainer_reference(tr, 0, &m);
    printf("bench_train: graph %d nodes, %d edges on 8 V100 (simulated); network D=%d; K=%d, %d epochs\n", n,
           gopt_graph_num_edges(g), pc.hidden, K, E);
    printf("reference (best of %s): %.4g ms by %s, computed in %.2f s (once per graph)\n", o.reference, ref * 1e3, m,
           t_ref);

    /* reference costs, measured now: forward, forward+backward, one simulation */
    const gopt_frozen *fz = gopt_graph_frozen(gopt_trainer_graph(tr, 0));
    float *feat = malloc(sizeof(float) * (size_t)n * GOPT_POLICY_NFEAT);
    int32_t *buf = malloc(sizeof(int32_t) * 3 * (size_t)n);
    float *w = calloc(3 * (size_t)n, sizeof(float));
    if (!feat || !buf || !w) return 1;
    CHECK(gopt_policy_features(fz, 8, NULL, feat, &err));
    gopt_sim *sim = NULL;
    gopt_sim_scratch *scr = NULL;
    CHECK(gopt_sim_create(gopt_trainer_graph(tr, 0), cm, &sim, &err));
    CHECK(gopt_sim_scratch_create(sim, &scr, &err));
    /* the decoder's inputs as the trainer sets them (the baselines' memory model) */
    double *din = malloc(sizeof(double) * (2 * (size_t)n + 8));
    if (!din) return 1;
    gopt_bl_problem bp = {0};
    bp.graph = gopt_trainer_graph(tr, 0);
    bp.cm = cm;
    bp.cost = gopt_sim_cost_table(sim);
    bp.ndev = 8;
    gopt_go_decoder_inputs(&bp, din, din + n, din + 2 * (size_t)n);
    CHECK(gopt_policy_set_decoder_inputs(pol, n, 8, din, din + n, din + 2 * (size_t)n, &err));
    t0 = gopt_now_seconds();
    CHECK(gopt_policy_forward(pol, fz, feat, 8, NULL, &err));
    double t_fwd = gopt_now_seconds() - t0;
    gopt_policy_actions a = {buf, buf + n, buf + 2 * (size_t)n};
    gopt_rng rng;
    gopt_rng_seed(&rng, 3);
    t0 = gopt_now_seconds();
    CHECK(gopt_policy_sample(pol, &rng, &a, &err));
    double t_sample = gopt_now_seconds() - t0;
    t0 = gopt_now_seconds();
    CHECK(gopt_policy_logprob(pol, &a, NULL, NULL, NULL, NULL, &err));
    double t_logp = gopt_now_seconds() - t0;
    for (size_t i = 0; i < 3 * (size_t)n; i++) w[i] = -1e-4f;
    t0 = gopt_now_seconds();
    CHECK(gopt_policy_backward(pol, &a, w, NULL, &err));
    double t_bwd = gopt_now_seconds() - t0;
    gopt_policy_zero_grad(pol);
    gopt_decisions d = {0};
    gopt_sim_result res;
    CHECK(gopt_decisions_init(&d, n, &err));
    CHECK(gopt_trainer_greedy(tr, 0, &d, &res, &err)); /* includes a forward */
    t0 = gopt_now_seconds();
    CHECK(gopt_sim_run(sim, &d, &res, scr, &err));
    double t_sim = gopt_now_seconds() - t0;
    printf("references: forward %.3f s, backward %.3f s (its decoder replay included), one simulation %.4f s\n", t_fwd,
           t_bwd, t_sim);
    printf("conditioned decoder (Hc=%d, memory masks): one sample %.3f s, one teacher-forced logprob %.3f s\n",
           pc.cond_hidden, t_sample, t_logp);
    {
        /* the PPO step's teacher-forced replays: K action sets one by one (K logprob passes) and
         * together (one batched backward, whose network part is one single backward's) */
        int32_t *kb = malloc(sizeof(int32_t) * 3 * (size_t)n * K);
        gopt_policy_actions *ka = malloc(sizeof(gopt_policy_actions) * K);
        float *kw = malloc(sizeof(float) * 3 * (size_t)n * K);
        if (!kb || !ka || !kw) return 1;
        for (int k = 0; k < K; k++) {
            int32_t *b = kb + (size_t)k * 3 * n;
            ka[k] = (gopt_policy_actions){b, b + n, b + 2 * (size_t)n};
            CHECK(gopt_policy_sample(pol, &rng, &ka[k], &err));
        }
        for (size_t i = 0; i < 3 * (size_t)n * K; i++) kw[i] = -1e-4f;
        /* CPU seconds too: on a loaded machine the wall times of these short calls are noise */
        double c0 = cpu_seconds();
        t0 = gopt_now_seconds();
        for (int k = 0; k < K; k++) CHECK(gopt_policy_logprob(pol, &ka[k], NULL, NULL, NULL, NULL, &err));
        double t_seq = gopt_now_seconds() - t0, c_seq = cpu_seconds() - c0;
        c0 = cpu_seconds();
        t0 = gopt_now_seconds();
        CHECK(gopt_policy_logprob(pol, &ka[0], NULL, NULL, NULL, NULL, &err));
        double t_lp1 = gopt_now_seconds() - t0, c_lp1 = cpu_seconds() - c0;
        c0 = cpu_seconds();
        t0 = gopt_now_seconds();
        CHECK(gopt_policy_backward(pol, &ka[0], kw, NULL, &err));
        double t_one = gopt_now_seconds() - t0, c_one = cpu_seconds() - c0;
        c0 = cpu_seconds();
        t0 = gopt_now_seconds();
        CHECK(gopt_policy_backward_batch(pol, K, ka, kw, NULL, &err));
        double t_bb = gopt_now_seconds() - t0, c_bb = cpu_seconds() - c0;
        gopt_policy_zero_grad(pol);
        double t_rep = t_bb - t_one + t_lp1, c_rep = c_bb - c_one + c_lp1;
        printf("replay of K=%d action sets: one by one (K logprobs) %.3f s, cpu %.3f s; batched with gradients %.3f s, "
               "cpu %.3f s (backward of K sets - backward of one + one logprob; cpu %.3f - %.3f + %.3f s)\n",
               K, t_seq, c_seq, t_rep, c_rep, c_bb, c_one, c_lp1);
        free(kb);
        free(ka);
        free(kw);
    }

    /* warm start (imitation), then the timed PPO step */
    gopt_trainer_stats st;
    t0 = gopt_now_seconds();
    for (int i = 0; i < o.imitate_steps; i++) CHECK(gopt_trainer_step(tr, &st, &err));
    printf("imitation warm start: %d steps in %.2f s (%.3f s/step)\n", o.imitate_steps, gopt_now_seconds() - t0,
           (gopt_now_seconds() - t0) / o.imitate_steps);
    double tw[64], tc[64];
    CHECK(timed_steps(tr, R, tw, tc, &st, &err));
    const double t_best = bench_minimum(tw, R), c_best = bench_minimum(tc, R);
    const double t_step = bench_median(tw, R), c_step = bench_median(tc, R);
    double fb = t_fwd + t_bwd;
    printf("PPO step (K=%d, %d epochs), best / median of %d steps: %.3f / %.3f s (target < 0.6 s for 10k nodes: %s), "
           "cpu %.3f / %.3f s (all threads); %d backward calls (one per epoch, batched over the K samples), %d invalid "
           "samples\n",
           K, E, R, t_best, t_step, t_best < 0.6 ? "met" : "NOT met", c_best, c_step, st.backward_calls, st.invalid);
    printf("  = %.1f forward+backward passes (median); the floor of %d forwards + %d backwards is %.2f s\n",
           t_step / fb, E, E, E * (t_fwd + t_bwd));
    printf("  best sample %.4g ms = %.3fx reference, mean %.3fx\n", st.best_step_s * 1e3, st.best_rel, st.mean_rel);
    if (old_path) {
        /* the old path in the same run: one network backward per sample (--backward rounds) */
        gopt_trainer_options orr = o;
        orr.imitate_steps = 0;
        orr.backward_rounds = 1;
        gopt_trainer *tr2 = NULL;
        CHECK(trainer_on_synth(pol, cm, &orr, nodes, 1, "bench_a", ref, &tr2, &err));
        gopt_trainer_stats st2;
        t0 = gopt_now_seconds();
        double c2 = cpu_seconds();
        CHECK(gopt_trainer_step(tr2, &st2, &err));
        double t2 = gopt_now_seconds() - t0;
        c2 = cpu_seconds() - c2;
        printf("  old path, one network backward per sample (--backward rounds): %.2f s, cpu %.2f s, %d backward "
               "calls; batched / per-sample %.2fx wall, %.2fx cpu\n",
               t2, c2, st2.backward_calls, t_step / t2, c_step / c2);
        gopt_trainer_free(tr2);
    }

    {
        /* the heads alone (--train heads) in the same run: after one step (its forward computes the
         * trunk), each step reuses the trunk and stops the backward at the heads */
        gopt_trainer_options oh = o;
        oh.imitate_steps = 0;
        oh.train_heads = 1;
        gopt_trainer *th = NULL;
        CHECK(trainer_on_synth(pol, cm, &oh, nodes, 1, "bench_a", ref, &th, &err));
        gopt_trainer_stats st3;
        CHECK(gopt_trainer_step(th, &st3, &err));
        double hw[64], hc[64];
        CHECK(timed_steps(th, R, hw, hc, &st3, &err));
        const double h_step = bench_median(hw, R), hc_step = bench_median(hc, R);
        printf("PPO step training the heads only (--train heads), best / median of %d steps: %.3f / %.3f s, cpu "
               "%.3f s; %.2fx the whole network's step (wall, median), %.2fx cpu\n",
               R, bench_minimum(hw, R), h_step, hc_step, h_step / t_step, hc_step / c_step);
        gopt_trainer_free(th);
    }

    /* fine-tuning on a held-out graph of the same size */
    gopt_trainer_options of = o;
    of.imitate_steps = 0;
    gopt_trainer *ft = NULL;
    CHECK(trainer_on_synth(pol, cm, &of, nodes, 2, "bench_b", 0, &ft, &err));
    const gopt_graph *h = gopt_trainer_graph(ft, 0);
    double href = gopt_trainer_reference(ft, 0, &m);
    gopt_decisions dh = {0};
    CHECK(gopt_decisions_init(&dh, gopt_graph_num_nodes(h), &err));
    CHECK(gopt_trainer_greedy(ft, 0, &dh, &res, &err));
    printf("fine-tuning on held-out %d nodes (reference %.4g ms by %s): zero-shot greedy %.3fx reference\n",
           gopt_graph_num_nodes(h), href * 1e3, m, res.step_time_s / href);
    double hist_t[4096], hist_b[4096];
    int steps = 0;
    t0 = gopt_now_seconds();
    while (steps < 4096 && (steps == 0 || gopt_now_seconds() - t0 < ft_budget)) {
        CHECK(gopt_trainer_step(ft, &st, &err));
        hist_t[steps] = gopt_now_seconds() - t0;
        hist_b[steps] = gopt_trainer_best(ft, 0, NULL) / href;
        steps++;
    }
    double final = hist_b[steps - 1];
    int reach = steps - 1;
    while (reach > 0 && hist_b[reach - 1] <= final * 1.01) reach--;
    printf("fine-tuning: %d steps in %.1f s; best %.3fx reference; within 1%% of it after %d steps, %.1f s "
           "(target < 60 s: %s)\n",
           steps, hist_t[steps - 1], final, reach + 1, hist_t[reach], hist_t[reach] < 60 ? "met" : "NOT met");
    gopt_decisions_destroy(&d);
    gopt_decisions_destroy(&dh);
    gopt_sim_scratch_free(scr);
    gopt_sim_free(sim);
    gopt_trainer_free(ft);
    gopt_trainer_free(tr);
    gopt_policy_free(pol);
    gopt_cost_free(cm);
    gopt_profile_free(prof);
    free(feat);
    free(buf);
    free(w);
    free(din);
    return 0;
}
