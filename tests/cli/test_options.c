/*
 * test_options.c: the command line of cohere-transcribe, run as a
 * subprocess: bad flags exit 2 naming the flag; --help lists every flag;
 * the issue-12 items about arguments: --dump-tensors refuses a FIFO, a
 * symlink, a device, an input and a model file (item 1); `-`, a folder
 * and `--model --verbose x.wav` (item 10); a file name with an escape
 * sequence is echoed escaped (item 11); --threads above the cores is
 * capped with a warning unless forced (item 12); output to /dev/full
 * fails (item 9); a Hub id is found in a fake Hugging Face cache; without
 * --model, $COHERE_TRANSCRIBE_MODEL or else the bundled demo model is used,
 * and the demo model says its bundled sentence (what `make run` shows).
 */
#include "cli_harness.h"

#define A_WAV TINY "/audio/a.wav"
#define B_WAV TINY "/audio/b.wav"

static void bad_flags_exit_2_naming_the_flag(void) {
    if (h_skip_without_cli()) return;
    h_mkdtemp();
    struct {
        const char *args[8];
        const char *needle;
    } cases[] = {
        {{"--bogus", B_WAV}, "--bogus"},
        {{"--model", MODEL}, "no input files"},
        {{"--model", MODEL, "--threads", "abc", B_WAV}, "--threads"},
        {{"--model", MODEL, "--formats", "doc", B_WAV}, "--formats"},
        {{"--model", MODEL, "--existing", "maybe", B_WAV}, "--existing"},
        {{"--model", MODEL, "--device", "tpu", B_WAV}, "tpu"},
        {{"--model", MODEL, "--dtype", "fp8", B_WAV}, "--dtype"},
        {{"--model", MODEL, "--vad", "silero", B_WAV}, "--vad"},
        {{"--model", MODEL, "--max-dur", "60", B_WAV}, "--max-dur"},
        {{"--model", MODEL, "--min-dur", "20", "--max-dur", "10", B_WAV}, "--min-dur"},
        {{"--model", MODEL, "--max-chars", "0", B_WAV}, "--max-chars"},
        {{"--model", MODEL, "--audio-memory-gb", "-1", B_WAV}, "--audio-memory-gb"},
        {{"--model", MODEL, "--quiet", "--verbose", B_WAV}, "--quiet"},
        {{"--model", MODEL, "--text-only", "--formats", "srt", B_WAV}, "--text-only"},
        {{"--model", MODEL, "--punctuation", "--no-punctuation", B_WAV}, "--punctuation"},
        {{"--model", MODEL, "--max-new-tokens", "500", "--max-retry-tokens", "400", B_WAV},
         "--max-retry-tokens"},
        {{"--model", MODEL, "--language", "xx", B_WAV}, "--language"},
        {{"--model", MODEL, "--beam-size", "0", B_WAV}, "--beam-size"},
        {{"--model", MODEL, "--beam-size", "17", B_WAV}, "--beam-size"},
        {{"--model", MODEL, "--beam-size", "two", B_WAV}, "--beam-size"},
        {{"--model", MODEL, "--text-only=yes", B_WAV}, "--text-only takes no value"},
        {{"--model", MODEL, "--language"}, "--language needs a value"},
        {{"--model", "/no/such/dir", B_WAV}, "/no/such/dir"},
        {{"--model", MODEL, "--model-revision", "main", B_WAV}, "--model-revision"},
        {{"--model", MODEL, "/no/such.wav"}, "/no/such.wav"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = h_run_argv(cases[i].args, NULL);
        CHECK_MSG(rc == 2 && h_err_has(cases[i].needle), "case %zu (%s): rc %d", i,
                  cases[i].needle, rc);
    }
    h_rmtree();
}

#define DEMO TEST_DATA_DIR "/../../models/cohere-demo-en"

static void default_model_is_the_env_or_the_demo(void) {
    if (h_skip_without_cli()) return;
    h_mkdtemp();
    setenv("COHERE_TRANSCRIBE_MODEL", "/no/such/model", 1);
    CHECK(h_run("--text-only", B_WAV, NULL) == 2 && h_err_has("/no/such/model") &&
          h_err_has("COHERE_TRANSCRIBE_MODEL") && h_err_has("pass --model"));
    setenv("COHERE_TRANSCRIBE_MODEL", MODEL, 1);
    CHECK(h_run("--text-only", "--quiet", B_WAV, NULL) == 0 && h_out[0]);
    /* --model wins over the variable */
    CHECK(h_run("--model", "/no/such/dir", "--text-only", B_WAV, NULL) == 2 && h_err_has("/no/such/dir"));
    unsetenv("COHERE_TRANSCRIBE_MODEL");
    char *want = h_read(DEMO "/sample.txt");
    CHECK_MSG(want, "no %s", DEMO "/sample.txt");
    int rc = h_run("--text-only", "--quiet", "--device", "cpu", DEMO "/sample.wav", NULL);
    CHECK_MSG(rc == 0 && want && !strcmp(h_out, want), "rc %d: the demo model said \"%s\", not \"%s\"", rc,
              h_out, want ? want : "");
    free(want);
    CHECK(h_run("--help", NULL) == 0 && strstr(h_out, "models/cohere-demo-en"));
    h_rmtree();
}

static void help_lists_every_flag(void) {
    if (h_skip_without_cli()) return;
    h_mkdtemp();
    static const char *flags[] = {
        "--model", "--model-revision", "--language", "--punctuation", "--no-punctuation",
        "--formats", "--output-dir", "--existing", "--device", "--backend", "--dtype",
        "--threads", "--force-threads", "--text-only", "--max-chars", "--max-cue-dur",
        "--max-gap", "--profile-json", "--quiet", "--verbose", "--version", "--help", "--vad",
        "--min-dur", "--max-dur", "--max-silence", "--energy-threshold", "--audio-memory-gb",
        "--batch-size", "--max-new-tokens", "--max-retry-tokens", "--beam-size", "--stop-repetition-loops",
        "--no-stop-repetition-loops", "--no-recursive", "--dump-tensors", "doctor", NULL};
    CHECK(h_run("--help", NULL) == 0);
    for (int i = 0; flags[i]; i++) CHECK_MSG(strstr(h_out, flags[i]), "--help lacks %s", flags[i]);
    CHECK(h_run("--version", NULL) == 0 && strstr(h_out, "cohere-transcribe ") &&
          strstr(h_out, "ffmpeg:"));
    h_rmtree();
}

/* issue 12 item 10 */
static void stdin_folders_and_swallowed_values(void) {
    if (h_skip_without_cli()) return;
    h_mkdtemp();
    CHECK(h_run("--model", MODEL, "--text-only", "-", NULL) == 2 && h_err_has("standard input"));
    /* --verbose is not taken as the model folder */
    CHECK(h_run("--model", "--verbose", B_WAV, NULL) == 2 && h_err_has("--model needs a value"));
    /* a folder is an input now (it used to exit 1); one without audio is a usage error */
    h_mkdirs(h_path("empty"));
    CHECK(h_run("--model", MODEL, "--text-only", h_path("empty"), NULL) == 2 &&
          h_err_has("no audio"));
    h_mkdirs(h_path("one"));
    h_copy(B_WAV, h_path("one/b.wav"));
    CHECK(h_run("--model", MODEL, "--text-only", "--max-new-tokens", "4", h_path("one"), NULL) == 0);
    CHECK(strlen(h_out) > 1);
    h_rmtree();
}

/* issue 12 item 1 */
static void dump_tensors_never_replaces_what_it_must_not(void) {
    if (h_skip_without_cli()) return;
    h_mkdtemp();
    h_copy(B_WAV, h_path("in.wav"));
    h_mkdirs(h_path("model"));
    char cmd[900];
    snprintf(cmd, sizeof cmd, "cp %s/* '%s'", MODEL, h_path("model"));
    CHECK(system(cmd) == 0);
    CHECK(mkfifo(h_path("fifo"), 0644) == 0);
    h_write(h_path("target"), "keep", 4);
    CHECK(symlink(h_path("target"), h_path("link")) == 0);
    const char *bad[4] = {h_path("fifo"), h_path("link"), h_path("in.wav"),
                          h_path("model/model.safetensors")};
    struct stat before;
    CHECK(stat(h_path("model/model.safetensors"), &before) == 0);
    for (int i = 0; i < 4; i++) {
        int rc = h_run("--model", h_path("model"), "--text-only", "--max-new-tokens", "2",
                       "--dump-tensors", bad[i], h_path("in.wav"), NULL);
        CHECK_MSG(rc == 2 && h_err_has("--dump-tensors"), "%s: rc %d", bad[i], rc);
    }
    struct stat sb;
    CHECK(lstat(h_path("fifo"), &sb) == 0 && S_ISFIFO(sb.st_mode));
    CHECK(lstat(h_path("link"), &sb) == 0 && S_ISLNK(sb.st_mode));
    CHECK(stat(h_path("model/model.safetensors"), &sb) == 0 && sb.st_size == before.st_size &&
          sb.st_ino == before.st_ino);
    CHECK(stat(h_path("in.wav"), &sb) == 0 && sb.st_size > 44);
    /* a device: a copy of /dev/null made here where the system lets us */
    if (mknod(h_path("null"), S_IFCHR | 0666, makedev(1, 3)) == 0) {
        CHECK(h_run("--model", MODEL, "--text-only", "--dump-tensors", h_path("null"),
                    h_path("in.wav"), NULL) == 2 && h_err_has("device"));
        CHECK(lstat(h_path("null"), &sb) == 0 && S_ISCHR(sb.st_mode));
    } else {
        printf("  (mknod not permitted here; the device case is skipped)\n");
    }
    /* and a good path still works */
    CHECK(h_run("--model", MODEL, "--text-only", "--max-new-tokens", "2", "--dump-tensors",
                h_path("d.safetensors"), h_path("in.wav"), NULL) == 0);
    CHECK(h_exists(h_path("d.safetensors")));
    h_rmtree();
}

/* issue 12 item 11 */
static void file_names_are_echoed_escaped(void) {
    if (h_skip_without_cli()) return;
    h_mkdtemp();
    const char *p = h_path("bad\x1b[31mname.wav");
    h_write(p, "not audio at all", 16);
    CHECK(h_run("--model", MODEL, "--text-only", p, NULL) == 1);
    CHECK(!strchr(h_err, 0x1b) && h_err_has("bad\\x1b[31mname.wav"));
    h_rmtree();
}

/* issue 12 item 12 */
static void threads_above_the_cores_are_capped(void) {
    if (h_skip_without_cli()) return;
    h_mkdtemp();
    CHECK(h_run("--model", MODEL, "--text-only", "--max-new-tokens", "2", "--threads", "1024",
                B_WAV, NULL) == 0);
    CHECK(h_err_has("--threads 1024") && h_err_has("core"));
    CHECK(h_run("--model", MODEL, "--text-only", "--max-new-tokens", "2", "--threads", "3",
                "--force-threads", B_WAV, NULL) == 0);
    CHECK(!strstr(h_err, "--threads"));
    h_rmtree();
}

/* issue 12 item 9 */
static void a_full_stdout_is_a_failure(void) {
    if (h_skip_without_cli()) return;
    h_mkdtemp();
    const char *args[] = {"--model", MODEL, "--text-only", "--max-new-tokens", "4", B_WAV, NULL};
    CHECK(h_run_argv(args, "/dev/full") == 1 && h_err_has("standard output"));
    const char *help[] = {"--help", NULL};
    CHECK(h_run_argv(help, "/dev/full") == 1);
    h_rmtree();
}

static void hub_ids_resolve_in_the_local_cache(void) {
    if (h_skip_without_cli()) return;
    h_mkdtemp();
    const char *hash = "0123456789abcdef0123456789abcdef01234567";
    const char *snap = h_path("hub/models--Org--Tiny/snapshots/%s", hash);
    h_mkdirs(snap);
    h_mkdirs(h_path("hub/models--Org--Tiny/refs"));
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "for f in %s/*; do ln -s \"$f\" '%s'/; done", MODEL, snap);
    CHECK(system(cmd) == 0);
    h_write(h_path("hub/models--Org--Tiny/refs/main"), hash, 40);
    setenv("HF_HUB_CACHE", h_path("hub"), 1);
    CHECK(h_run("--model", "Org/Tiny", "--text-only", "--max-new-tokens", "2", B_WAV, NULL) == 0);
    CHECK(h_run("--model", "Org/Tiny", "--model-revision", hash, "--text-only",
                "--max-new-tokens", "2", B_WAV, NULL) == 0);
    CHECK(h_run("--model", "Org/Tiny", "--model-revision", "v9", "--text-only", B_WAV, NULL) == 2 &&
          h_err_has("refs/v9"));
    CHECK(h_run("--model", "Org/Missing", "--text-only", B_WAV, NULL) == 2 &&
          h_err_has("models--Org--Missing") && h_err_has("nothing is downloaded"));
    unsetenv("HF_HUB_CACHE");
    /* HF_HOME/hub is the next place */
    snprintf(cmd, sizeof cmd, "mv '%s' '%s'", h_path("hub"), h_path("home"));
    CHECK(system(cmd) == 0);
    h_mkdirs(h_path("hfhome"));
    snprintf(cmd, sizeof cmd, "mv '%s' '%s'", h_path("home"), h_path("hfhome/hub"));
    CHECK(system(cmd) == 0);
    setenv("HF_HOME", h_path("hfhome"), 1);
    CHECK(h_run("--model", "Org/Tiny", "--text-only", "--max-new-tokens", "2", B_WAV, NULL) == 0);
    CHECK(h_run("doctor", "--model", "Org/Tiny", NULL) == 0 && strstr(h_out, "tensors"));
    unsetenv("HF_HOME");
    h_rmtree();
}

TEST_MAIN(T(default_model_is_the_env_or_the_demo), T(bad_flags_exit_2_naming_the_flag), T(help_lists_every_flag),
          T(stdin_folders_and_swallowed_values), T(dump_tensors_never_replaces_what_it_must_not),
          T(file_names_are_echoed_escaped), T(threads_above_the_cores_are_capped),
          T(a_full_stdout_is_a_failure), T(hub_ids_resolve_in_the_local_cache))
