/*
 * The Intel IPsec-MB job API for the mb driver (src/ffi.rs). The job and manager
 * structs (IMB_JOB, IMB_MGR) are large and change between library versions: they
 * stay on this side, compiled against the installed header. Rust hands over one
 * small descriptor per request (struct ocf_mb_job) and reads back the user ids of
 * completed jobs (struct ocf_mb_done), in submission order.
 */
#include <stdint.h>
#include <string.h>
#include <intel-ipsec-mb.h>

enum { OCF_MB_CBC_ENC = 0, OCF_MB_CBC_DEC = 1, OCF_MB_CTR = 2 };

struct ocf_mb_job {
        const uint8_t *src;
        uint8_t *dst;
        uint64_t len;
        const uint8_t *iv;
        uint64_t iv_len;
        const void *enc_keys;
        const void *dec_keys;
        uint64_t key_len;
        uint64_t mode;
        uint64_t user;
};

struct ocf_mb_done {
        uint64_t user;
        uint64_t ok;
};

IMB_MGR *ocf_mb_new(void)
{
        IMB_MGR *m = alloc_mb_mgr(0);

        if (m == NULL)
                return NULL;
        init_mb_mgr_auto(m, NULL);
        if (imb_get_errno(m) != 0) {
                free_mb_mgr(m);
                return NULL;
        }
        return m;
}

void ocf_mb_free(IMB_MGR *m)
{
        free_mb_mgr(m);
}

/* Expands an AES key (16, 24 or 32 bytes) into 240-byte, 16-aligned schedules. */
int ocf_mb_keyexp(IMB_MGR *m, const uint8_t *key, uint64_t key_len, void *enc, void *dec)
{
        switch (key_len) {
        case 16: IMB_AES_KEYEXP_128(m, key, enc, dec); return 0;
        case 24: IMB_AES_KEYEXP_192(m, key, enc, dec); return 0;
        case 32: IMB_AES_KEYEXP_256(m, key, enc, dec); return 0;
        default: return -1;
        }
}

static uint64_t record(IMB_JOB *job, struct ocf_mb_done *out, uint64_t n)
{
        out[n].user = (uint64_t)(uintptr_t)job->user_data;
        out[n].ok = job->status == IMB_STATUS_COMPLETED;
        return n + 1;
}

/* Drains every completed job into out (room for max); returns how many. */
static uint64_t drain(IMB_MGR *m, IMB_JOB *job, struct ocf_mb_done *out, uint64_t n, uint64_t max)
{
        if (job != NULL && n < max)
                n = record(job, out, n);
        while (n < max && (job = IMB_GET_COMPLETED_JOB(m)) != NULL)
                n = record(job, out, n);
        return n;
}

/*
 * Submits one job; writes the jobs the manager returned (completed, oldest first)
 * to out and returns their number. out must have room for every job in flight
 * (the manager holds at most IMB_MAX_JOBS).
 */
uint64_t ocf_mb_submit(IMB_MGR *m, const struct ocf_mb_job *d, struct ocf_mb_done *out, uint64_t max)
{
        IMB_JOB *job = IMB_GET_NEXT_JOB(m);

        job->cipher_mode = d->mode == OCF_MB_CTR ? IMB_CIPHER_CNTR : IMB_CIPHER_CBC;
        job->cipher_direction = d->mode == OCF_MB_CBC_DEC ? IMB_DIR_DECRYPT : IMB_DIR_ENCRYPT;
        job->chain_order = d->mode == OCF_MB_CBC_DEC ? IMB_ORDER_HASH_CIPHER : IMB_ORDER_CIPHER_HASH;
        job->hash_alg = IMB_AUTH_NULL;
        job->src = d->src;
        job->dst = d->dst;
        job->cipher_start_src_offset_in_bytes = 0;
        job->msg_len_to_cipher_in_bytes = d->len;
        job->iv = d->iv;
        job->iv_len_in_bytes = d->iv_len;
        job->enc_keys = d->enc_keys;
        job->dec_keys = d->dec_keys;
        job->key_len_in_bytes = d->key_len;
        job->user_data = (void *)(uintptr_t)d->user;
        return drain(m, IMB_SUBMIT_JOB(m), out, 0, max);
}

/* Completes every job in the manager; as ocf_mb_submit for out. */
uint64_t ocf_mb_flush(IMB_MGR *m, struct ocf_mb_done *out, uint64_t max)
{
        uint64_t n = 0;
        IMB_JOB *job;

        while (n < max && (job = IMB_FLUSH_JOB(m)) != NULL)
                n = record(job, out, n);
        return drain(m, NULL, out, n, max);
}
