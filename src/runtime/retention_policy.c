/*
 * retention_policy.c: the classes' times to live and the storage budget, read from the config
 * file's `retention` block and an agent's (docs/storage.md, "Growth and retention").
 */
#include "base/common.h"

#include "os/clock.h"
#include "runtime/retention.h"

static const char *const CLASS_NAMES[VG_RET_NCLASS] = {"runtime", "trace", "action", "report",
                                                       "summary"};

/* The defaults: the wake log and traces a month, what tools did and reports a quarter,
 * compaction bookkeeping a quarter; summaries themselves are messages and are never pruned. */
static const int64_t DEFAULT_DAYS[VG_RET_NCLASS] = {30, 30, 90, 90, 90};

const char *vg_retention_class_name(enum vg_retention_class c)
{
    return (unsigned)c < VG_RET_NCLASS ? CLASS_NAMES[c] : NULL;
}

void vg_retention_policy_defaults(struct vg_retention_policy *p)
{
    for (int i = 0; i < VG_RET_NCLASS; i++)
        p->ttl_ms[i] = DEFAULT_DAYS[i] * 24 * 3600000LL;
    p->hold = 0;
}

/* A number then one unit letter (s m h d w), or "never" (os/clock.h). */
vigil_code vg_retention_duration(const char *text, const char *what, int64_t *out_ms,
                                 vigil_error *err)
{
    if (vg_duration_parse_ms(text, out_ms))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "%s: \"%.40s\" is not a duration (a number and s, m, h, d or w, "
                       "such as 30d, or never)",
                       what, text ? text : "");
    return VIGIL_OK;
}

vigil_code vg_retention_size(const json_t *v, const char *what, int64_t *out, vigil_error *err)
{
    static const char *const units[] = {"KB", "MB", "GB", "TB"};
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        *out = json_integer_value(v);
        return VIGIL_OK;
    }
    const char *t = json_string_value(v);
    char *end = NULL;
    long long n = t ? strtoll(t, &end, 10) : -1;
    int64_t scale = 1;
    for (size_t i = 0; n >= 0 && end && end != t && i < VG_ARRAY_LEN(units); i++) {
        scale *= 1024;
        if (!strcmp(end, units[i]) && n < (1LL << 40) / scale * 1024) {
            *out = n * scale;
            return VIGIL_OK;
        }
    }
    return VG_FAIL(err, VIGIL_EINVAL,
                   "%s: not a size (a byte count, or a number and KB, MB, GB or TB, such as "
                   "500MB)",
                   what);
}

static vigil_code class_ttl(struct vg_retention_policy *p, int c, const json_t *v,
                            const char *where, vigil_error *err)
{
    char what[96];
    snprintf(what, sizeof what, "%s.%s", where, CLASS_NAMES[c]);
    if (!json_is_string(v))
        return VG_FAIL(err, VIGIL_EINVAL, "%s: a duration such as 30d, or never", what);
    return vg_retention_duration(json_string_value(v), what, &p->ttl_ms[c], err);
}

vigil_code vg_retention_policy_apply(struct vg_retention_policy *p, const json_t *block,
                                     const char *where, vigil_error *err)
{
    const char *key;
    const json_t *v;
    if (!block)
        return VIGIL_OK;
    if (!json_is_object(block))
        return VG_FAIL(err, VIGIL_EINVAL, "%s: an object of classes and their durations", where);
    json_object_foreach ((json_t *)block, key, v) {
        int c = 0;
        while (c < VG_RET_NCLASS && strcmp(key, CLASS_NAMES[c]))
            c++;
        vigil_code rc = VIGIL_OK;
        if (c < VG_RET_NCLASS)
            rc = class_ttl(p, c, v, where, err);
        else if (!strcmp(key, "hold") && json_is_boolean(v))
            p->hold = json_is_true(v);
        else if (strcmp(key, "budget") && strcmp(key, "interval"))
            rc = VG_FAIL(err, VIGIL_EINVAL,
                         "%s.%s: not a retention setting (runtime, trace, action, report, "
                         "summary, hold; the config file's also budget and interval)",
                         where, key);
        if (rc)
            return rc;
    }
    return VIGIL_OK;
}
