/* Planner internals other folders use (pure functions). */
#ifndef HS_PLANNER_H
#define HS_PLANNER_H

/* The Zipf exponent a for which the top_n of n items (weights (i+1)^-a)
 * take `share` of the total: the default skew and `trace gen` use it. */
double hs__zipf_alpha(int n, int top_n, double share);

#endif
