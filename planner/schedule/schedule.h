// Umbrella header for pipeline schedules: generation (build_schedule.h),
// validation (check_schedule.h) and in-flight / bubble counts
// (in_flight.h). See docs/schedules.md for the orderings and formulas.
#pragma once

#include "planner/schedule/action.h"
#include "planner/schedule/build_schedule.h"
#include "planner/schedule/check_schedule.h"
#include "planner/schedule/in_flight.h"
