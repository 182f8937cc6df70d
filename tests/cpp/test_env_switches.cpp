// The environment switches of the launchers (src/launch/family_dispatch.h): what each reader
// makes of set, unset and malformed values (the A/B runs of docs/kernels/*.md rely on them).
#include <gtest/gtest.h>

#include <cstdlib>

#include "launch/family_dispatch.h"

namespace flashkit_test {
namespace {

namespace dispatch = flashkit::dispatch;

constexpr const char* kName = "FLASHKIT_TEST_ENV_SWITCH";

class EnvSwitch : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv(kName); }
  static void set(const char* v) { ASSERT_EQ(setenv(kName, v, 1), 0); }
};

TEST_F(EnvSwitch, FlagAndOffReadTheFirstCharacter) {
  unsetenv(kName);
  EXPECT_FALSE(dispatch::env_flag(kName));
  EXPECT_FALSE(dispatch::env_off(kName));
  set("1");
  EXPECT_TRUE(dispatch::env_flag(kName));
  EXPECT_FALSE(dispatch::env_off(kName));
  set("0");
  EXPECT_FALSE(dispatch::env_flag(kName));
  EXPECT_TRUE(dispatch::env_off(kName));
  set("");
  EXPECT_FALSE(dispatch::env_flag(kName));
  EXPECT_FALSE(dispatch::env_off(kName));
  set("yes");
  EXPECT_FALSE(dispatch::env_flag(kName));
  EXPECT_FALSE(dispatch::env_off(kName));
}

TEST_F(EnvSwitch, IntTakesPlainDecimalsOnly) {
  unsetenv(kName);
  EXPECT_EQ(dispatch::env_int(kName, -1), -1);
  set("0");
  EXPECT_EQ(dispatch::env_int(kName, -1), 0);
  set("33");
  EXPECT_EQ(dispatch::env_int(kName, -1), 33);
  set("132");
  EXPECT_EQ(dispatch::env_int(kName, 7), 132);
  for (const char* bad : {"", "-5", "12x", " 3", "3 ", "0x10", "1e3", "99999999999999999999"}) {
    set(bad);
    EXPECT_EQ(dispatch::env_int(kName, -1), -1) << "'" << bad << "'";
  }
}

}  // namespace
}  // namespace flashkit_test
