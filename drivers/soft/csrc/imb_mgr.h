/*
 * The one IPsec-MB manager setup both of ocf's C glue files use: the soft driver's
 * (csrc/ipsec_mb.c, ChaCha20-Poly1305's direct API) and the multi-buffer driver's
 * (drivers/mb/csrc/mb.c, the job API, whose build.rs adds this folder to its include
 * path). Include after <intel-ipsec-mb.h>.
 */
#ifndef OCF_IMB_MGR_H
#define OCF_IMB_MGR_H

/* A manager set up for the best code path this CPU runs, or NULL. */
static inline IMB_MGR *ocf_imb_mgr_new(void)
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

#endif
