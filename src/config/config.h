/*
 * config.h: vigil's configuration: one YAML or JSON file plus environment overrides, read into
 * a tree that any module queries by dotted key ("model.provider"). API keys are never read
 * from the file; adapters take them from the environment.
 */
#ifndef VG_CONFIG_H
#define VG_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct vg_config;

/*
 * Where YAML text is not what libfyaml may safely read: strict UTF-8 (RFC 3629), no tab, no
 * control character but LF and CR (config.c says why). VG_YAML_TEXT_OK when it is; otherwise
 * the fault, with the 1-based line and column of its first byte and that byte. The config file
 * and agent manifests are checked with it before libfyaml sees them.
 */
enum vg_yaml_text_fault {
    VG_YAML_TEXT_OK,
    VG_YAML_TEXT_TAB,
    VG_YAML_TEXT_CONTROL,
    VG_YAML_TEXT_UTF8
};
enum vg_yaml_text_fault vg_yaml_text_check(const char *text, size_t len, int *line, int *col,
                                           unsigned char *byte);

/*
 * Where a YAML syntax error libfyaml reported at *line, *col (1-based, as its diagnostics
 * count) should point the user. An error found at the end of the text (an unclosed `[` or
 * `{`, most often) lies past the file's last line: it then points at the innermost `[` or `{`
 * still open, else at the end of the last line that has text.
 */
void vg_yaml_error_place(const char *text, size_t len, int *line, int *col);

/*
 * Load the config file and apply the environment overrides (VIGIL_MODEL_PROVIDER and friends,
 * see docs/models.md; VIGIL_EMBED_*, see docs/memory.md). path NULL: $VIGIL_CONFIG, else
 * $XDG_CONFIG_HOME/vigil/config.yaml, else
 * ~/.config/vigil/config.yaml; a missing default file gives an empty config, a missing explicit
 * path (argument or $VIGIL_CONFIG) is ENOTFOUND. A file ending in .json is read as JSON, any
 * other as YAML. Errors: ENOTFOUND, EPARSE (message names the file and line), EINVAL (a
 * value of the wrong type, naming the key), ENOMEM. *out is owned: vg_config_free.
 */
vigil_code vg_config_load(const char *path, struct vg_config **out, vigil_error *err);
/* Parse text (no file, no environment). name is used in messages and picks the format by its
 * ending (".json": JSON, else YAML). */
vigil_code vg_config_parse(const char *text, size_t len, const char *name, struct vg_config **out,
                           vigil_error *err);
/* Another file a person writes in YAML or JSON (by name's ending, as vg_config_parse), read
 * into a JSON value without any of the config's checks; what names it in messages ("malformed
 * WHAT \"NAME\" at line L, column C: ..."). An empty YAML file reads as {}. *out is owned. */
vigil_code vg_doc_parse(const char *text, size_t len, const char *name, const char *what,
                        json_t **out, vigil_error *err);
/* An empty config (every lookup returns its default). */
vigil_code vg_config_new(struct vg_config **out, vigil_error *err);
/* Apply the environment overrides to a config (vg_config_load does this already). */
vigil_code vg_config_apply_env(struct vg_config *cfg, vigil_error *err);
void vg_config_free(struct vg_config *cfg);

/* The file that was loaded, or NULL when none was. Borrowed, lives as long as cfg. */
const char *vg_config_path(const struct vg_config *cfg);
/* The default config path (see vg_config_load) into out. */
vigil_code vg_config_default_path(char *out, size_t n, vigil_error *err);

/* Lookups by dotted key. Missing keys and values of another type give def. Strings are
 * borrowed from cfg. Integers accept integral reals; bools accept true/false. */
const char *vg_config_get_string(const struct vg_config *cfg, const char *key, const char *def);
int64_t vg_config_get_int(const struct vg_config *cfg, const char *key, int64_t def);
double vg_config_get_double(const struct vg_config *cfg, const char *key, double def);
int vg_config_get_bool(const struct vg_config *cfg, const char *key, int def);
/* The raw value (borrowed, NULL when missing). */
json_t *vg_config_get(const struct vg_config *cfg, const char *key);

/* Strict lookups for validation: a present value of the wrong type is EINVAL naming the key;
 * a missing one gives def. */
vigil_code vg_config_string(const struct vg_config *cfg, const char *key, const char *def,
                            const char **out, vigil_error *err);
vigil_code vg_config_int(const struct vg_config *cfg, const char *key, int64_t def, int64_t *out,
                         vigil_error *err);

/* Set a value by dotted key, creating objects on the way (command-line flags). */
vigil_code vg_config_set_string(struct vg_config *cfg, const char *key, const char *value,
                                vigil_error *err);
vigil_code vg_config_set_int(struct vg_config *cfg, const char *key, int64_t value,
                             vigil_error *err);

#endif
