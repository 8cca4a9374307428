// The accuracy dtplan quotes for MoE plans (planner/validate/published_accuracy.h)
// is what the bundled MoE case file gives today: never better, and not stale.
#include "planner/validate/published_accuracy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "planner/validate/case.h"
#include "planner/validate/run_validation.h"

namespace dt {
namespace {

struct Scored {
  int cases = 0;
  double mape = 0, max_error = 0, slowest = 0, fastest = 0;
};

Scored ScoreMoeFile() {
  auto cases = ReadJsonCases(std::string(DT_SOURCE_DIR) + "/" + kMoeAccuracy.file);
  EXPECT_TRUE(cases.ok()) << cases.status().message();
  if (!cases.ok()) return {};
  auto rep = RunValidation(*cases, ValidationOptions{});
  EXPECT_TRUE(rep.ok()) << rep.status().message();
  if (!rep.ok()) return {};
  Scored s;
  s.cases = rep->scored;
  s.mape = rep->mape;
  s.max_error = rep->max_error;
  for (const CaseResult& c : rep->cases) {
    if (!c.skipped.empty() || c.predicted_s <= 0 || c.measured_s <= 0) continue;
    s.slowest = std::max(s.slowest, c.measured_s / c.predicted_s);
    s.fastest = std::max(s.fastest, c.predicted_s / c.measured_s);
  }
  return s;
}

// A quoted figure may round the scored one up (never down by more than its
// last printed digit) and may lag it by at most `stale`.
void ExpectQuoted(const char* what, double quoted, double scored, double digit, double stale) {
  EXPECT_GE(quoted, scored - digit / 2) << what << ": quoted " << quoted << " claims better than the file's " << scored;
  EXPECT_LE(quoted, scored + stale) << what << ": quoted " << quoted << " is stale against the file's " << scored
                                    << "; update planner/validate/published_accuracy.h";
}

TEST(PublishedAccuracy, MoeFiguresAreWhatTheBundledFileGives) {
  const Scored s = ScoreMoeFile();
  EXPECT_EQ(s.cases, kMoeAccuracy.cases);
  ExpectQuoted("MAPE", kMoeAccuracy.mape, s.mape, 0.001, 0.01);
  ExpectQuoted("max error", kMoeAccuracy.max_error, s.max_error, 0.001, 0.02);
  ExpectQuoted("slowest run / prediction", kMoeAccuracy.slowest_ratio, s.slowest, 0.01, 0.05);
  ExpectQuoted("prediction / fastest run", kMoeAccuracy.fastest_ratio, s.fastest, 0.01, 0.05);
}

TEST(PublishedAccuracy, MoeNoteQuotesTheFiguresAndNamesWhatIsUncertain) {
  const std::string n = MoeAccuracyNote();
  EXPECT_NE(n.find(std::to_string(kMoeAccuracy.cases) + " published"), std::string::npos) << n;
  EXPECT_NE(n.find(kMoeAccuracy.file), std::string::npos) << n;
  EXPECT_NE(n.find("synchronisation"), std::string::npos) << n;
  EXPECT_NE(n.find("docs/validation.md"), std::string::npos) << n;
}

}  // namespace
}  // namespace dt
