/*
 * The Intel IPsec-MB job API for the mb driver (src/ffi.rs). The job and manager
 * structs (IMB_JOB, IMB_MGR) are large and change between library versions: they
 * stay on this side, compiled against the installed header. Rust hands over one
 * small descriptor per request (struct ocf_mb_job) and reads back the user ids of
 * completed jobs (struct ocf_mb_done), in submission order. Key set-up (AES and
 * DES schedules, HMAC ipad/opad digests, GCM hash keys) is done here once per
 * session, into memory Rust owns and wipes.
 */
#define _DEFAULT_SOURCE /* explicit_bzero */
#include <stdint.h>
#include <string.h>
#include <intel-ipsec-mb.h>

#include "imb_mgr.h"

/* Indexes shared with src/ffi.rs (CipherKind, HashKind). */
static const IMB_CIPHER_MODE ciphers[] = {
        IMB_CIPHER_NULL, IMB_CIPHER_CBC, IMB_CIPHER_CNTR, IMB_CIPHER_DES3, IMB_CIPHER_GCM,
};
enum { OCF_MB_GCM = 4 };
static const IMB_HASH_ALG hashes[] = {
        IMB_AUTH_NULL, IMB_AUTH_HMAC_SHA_1, IMB_AUTH_HMAC_SHA_256, IMB_AUTH_HMAC_SHA_384,
        IMB_AUTH_HMAC_SHA_512,
};
#define OCF_MB_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* The room Rust gives a GCM key (ffi::GcmKey). */
#define OCF_MB_GCM_KEY_ROOM 1024
_Static_assert(sizeof(struct gcm_key_data) <= OCF_MB_GCM_KEY_ROOM, "ffi::GcmKey is too small");

struct ocf_mb_job {
        const uint8_t *src;     /* base: the cipher and hash regions are offsets from it */
        uint8_t *dst;           /* cipher output (in place: src + cipher_off) */
        uint64_t cipher_off;
        uint64_t cipher_len;
        uint64_t hash_off;
        uint64_t hash_len;
        const uint8_t *iv;
        uint64_t iv_len;
        const void *enc_keys;
        const void *dec_keys;
        uint64_t key_len;
        const uint8_t *ipad;    /* HMAC: the digests of key ^ ipad, key ^ opad */
        const uint8_t *opad;
        const uint8_t *aad;     /* GCM */
        uint64_t aad_len;
        uint8_t *tag;           /* the computed tag (also when decrypting: Rust compares) */
        uint64_t tag_len;
        uint32_t cipher;        /* index into ciphers */
        uint32_t hash;          /* index into hashes (GCM: ignored) */
        uint32_t decrypt;
        uint32_t pad;
        uint64_t user;
};

struct ocf_mb_done {
        uint64_t user;
        uint64_t ok;
};

IMB_MGR *ocf_mb_new(void)
{
        return ocf_imb_mgr_new();
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

/* Three DES key schedules (3 x 16 x 8 bytes) from a 24-byte 3DES key. */
void ocf_mb_des3_keys(IMB_MGR *m, const uint8_t *key, uint64_t *ks)
{
        for (int i = 0; i < 3; i++)
                IMB_DES_KEYSCHED(m, ks + 16 * i, key + 8 * i);
}

/* The AES-GCM key data (round keys and GHASH key powers) in room of OCF_MB_GCM_KEY_ROOM. */
int ocf_mb_gcm_key(IMB_MGR *m, const uint8_t *key, uint64_t key_len, void *out)
{
        switch (key_len) {
        case 16: IMB_AES128_GCM_PRE(m, key, out); return 0;
        case 24: IMB_AES192_GCM_PRE(m, key, out); return 0;
        case 32: IMB_AES256_GCM_PRE(m, key, out); return 0;
        default: return -1;
        }
}

static void one_block(IMB_MGR *m, uint32_t hash, const uint8_t *block, uint8_t *out)
{
        switch (hash) {
        case 1: IMB_SHA1_ONE_BLOCK(m, block, out); break;
        case 2: IMB_SHA256_ONE_BLOCK(m, block, out); break;
        case 3: IMB_SHA384_ONE_BLOCK(m, block, out); break;
        default: IMB_SHA512_ONE_BLOCK(m, block, out); break;
        }
}

/*
 * HMAC (RFC 2104) set-up for hash 1..4 (SHA-1, SHA-256, -384, -512): the state after one
 * block of key ^ 0x36 and of key ^ 0x5c, as the job wants them (64 bytes of room each).
 * A key longer than the block is hashed first. The copies of the key are wiped.
 */
int ocf_mb_hmac_pads(IMB_MGR *m, uint32_t hash, const uint8_t *key, uint64_t key_len,
                     uint8_t *ipad, uint8_t *opad)
{
        uint8_t k[IMB_SHA_512_BLOCK_SIZE] = { 0 }, block[IMB_SHA_512_BLOCK_SIZE];
        uint64_t bs = hash >= 3 ? 128 : 64;

        if (hash < 1 || hash > 4)
                return -1;
        if (key_len > bs) {
                switch (hash) {
                case 1: IMB_SHA1(m, key, key_len, k); break;
                case 2: IMB_SHA256(m, key, key_len, k); break;
                case 3: IMB_SHA384(m, key, key_len, k); break;
                default: IMB_SHA512(m, key, key_len, k); break;
                }
        } else {
                memcpy(k, key, key_len);
        }
        for (uint64_t i = 0; i < bs; i++)
                block[i] = k[i] ^ 0x36;
        one_block(m, hash, block, ipad);
        for (uint64_t i = 0; i < bs; i++)
                block[i] = k[i] ^ 0x5c;
        one_block(m, hash, block, opad);
        explicit_bzero(k, sizeof(k));
        explicit_bzero(block, sizeof(block));
        return 0;
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
 * (the manager holds at most IMB_MAX_JOBS). An unknown cipher or hash index is
 * submitted as an invalid mode, which the library fails (status not COMPLETED).
 */
uint64_t ocf_mb_submit(IMB_MGR *m, const struct ocf_mb_job *d, struct ocf_mb_done *out, uint64_t max)
{
        IMB_JOB *job = IMB_GET_NEXT_JOB(m);

        job->cipher_mode = d->cipher < OCF_MB_COUNT(ciphers) ? ciphers[d->cipher] : IMB_CIPHER_NUM;
        job->cipher_direction = d->decrypt ? IMB_DIR_DECRYPT : IMB_DIR_ENCRYPT;
        job->chain_order = d->decrypt ? IMB_ORDER_HASH_CIPHER : IMB_ORDER_CIPHER_HASH;
        job->src = d->src;
        job->dst = d->dst;
        job->cipher_start_src_offset_in_bytes = d->cipher_off;
        job->msg_len_to_cipher_in_bytes = d->cipher_len;
        job->hash_start_src_offset_in_bytes = d->hash_off;
        job->msg_len_to_hash_in_bytes = d->hash_len;
        job->iv = d->iv;
        job->iv_len_in_bytes = d->iv_len;
        job->enc_keys = d->enc_keys;
        job->dec_keys = d->dec_keys;
        job->key_len_in_bytes = d->key_len;
        job->auth_tag_output = d->tag;
        job->auth_tag_output_len_in_bytes = d->tag_len;
        if (d->cipher == OCF_MB_GCM) {
                job->hash_alg = IMB_AUTH_AES_GMAC;
                job->u.GCM.aad = d->aad;
                job->u.GCM.aad_len_in_bytes = d->aad_len;
        } else {
                job->hash_alg = d->hash < OCF_MB_COUNT(hashes) ? hashes[d->hash] : IMB_AUTH_NUM;
                job->u.HMAC._hashed_auth_key_xor_ipad = d->ipad;
                job->u.HMAC._hashed_auth_key_xor_opad = d->opad;
        }
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
