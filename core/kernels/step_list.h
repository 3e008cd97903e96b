// The list of step kernels (see steps.h), alone so that host code can number the steps
// without including kernel code. X(name, fn); order is the step id (core/src/blocked.h).
#ifndef ML_KERNELS_STEP_LIST_H
#define ML_KERNELS_STEP_LIST_H

// clang-format off
#define ML_STEP_TABLE(X)                \
  X(scan, ml_step_scan)                 \
  X(scan_final, ml_step_scan_final)     \
  X(load, ml_step_load)                 \
  X(eye, ml_step_eye)                   \
  X(store, ml_step_store)               \
  X(info, ml_step_info)                 \
  X(gemm, ml_step_gemm)                 \
  X(gemm_sum, ml_step_gemm_sum)         \
  X(qr_panel, ml_step_qr_panel)         \
  X(larft, ml_step_larft)               \
  X(tridiag_prep, ml_step_tridiag_prep)   \
  X(tridiag_bisect, ml_step_tridiag_bisect) \
  X(tridiag_link, ml_step_tridiag_link)   \
  X(tridiag_zero, ml_step_tridiag_zero)   \
  X(tridiag_invit, ml_step_tridiag_invit) \
  X(tridiag_cluster, ml_step_tridiag_cluster)   \
  X(trd_update, ml_step_trd_update)     \
  X(trd_symv, ml_step_trd_symv)   \
  X(trd_panel, ml_step_trd_panel)       \
  X(trd_panel_tri, ml_step_trd_panel_tri) \
  X(trd_res, ml_step_trd_res)           \
  X(brd_col, ml_step_brd_col)           \
  X(brd_row, ml_step_brd_row)           \
  X(brd_x, ml_step_brd_x)               \
  X(brd_transpose, ml_step_brd_transpose) \
  X(brd_tgk, ml_step_brd_tgk)           \
  X(brd_tgk_out, ml_step_brd_tgk_out)   \
  X(brd_tgk_fix, ml_step_brd_tgk_fix)   \
  X(sb_band, ml_step_sb_band)           \
  X(sb_chase, ml_step_sb_chase)         \
  X(sb_sweeps, ml_step_sb_sweeps)       \
  X(sb_extract, ml_step_sb_extract)     \
  X(tsqr_leaf, ml_step_tsqr_leaf)       \
  X(tsqr_tree, ml_step_tsqr_tree)       \
  X(tsqr_rebuild, ml_step_tsqr_rebuild) \
  X(dc_leaf, ml_step_dc_leaf)           \
  X(dc_deflate, ml_step_dc_deflate)     \
  X(dc_secular, ml_step_dc_secular)     \
  X(dc_zhat, ml_step_dc_zhat)           \
  X(dc_vec, ml_step_dc_vec)             \
  X(dc_out, ml_step_dc_out)             \
  X(larft_gram, ml_step_larft_gram)     \
  X(qr_larft, ml_step_qr_larft)         \
  X(sb_back_t, ml_step_sb_back_t)       \
  X(sb_back, ml_step_sb_back)           \
  X(sb_block, ml_step_sb_block)         \
  X(sb_block_wide, ml_step_sb_block)     \
  X(qr_panel_reg, ml_step_qr_panel_reg) \
  X(qr_panel_rot16, ml_step_qr_panel_rot16) \
  X(qr_panel_rot8, ml_step_qr_panel_rot8)   \
  X(larfb_cols, ml_step_larfb_cols)     \
  X(ls_init, ml_step_ls_init)           \
  X(ls_load, ml_step_ls_load)           \
  X(ls_store, ml_step_ls_store)         \
  X(ls_info, ml_step_ls_info)           \
  X(ls_pivots, ml_step_ls_pivots)       \
  X(ls_potrf, ml_step_ls_potrf)         \
  X(ls_getf2, ml_step_ls_getf2)         \
  X(ls_laswp, ml_step_ls_laswp)         \
  X(ls_trsm, ml_step_ls_trsm)           \
  X(ls_diag, ml_step_ls_diag)           \
  X(brd_res, ml_step_brd_res)           \
  X(ls_getf2_r8, ml_step_ls_getf2_r8)   \
  X(ls_getf2_r16, ml_step_ls_getf2_r16) \
  X(ls_getf2_r32, ml_step_ls_getf2_r32) \
  X(ls_laswp_blk, ml_step_ls_laswp_blk) \
  X(ls_potrf_inv, ml_step_ls_potrf_inv) \
  X(ls_trtri, ml_step_ls_trtri)
// clang-format on

#endif  // ML_KERNELS_STEP_LIST_H
