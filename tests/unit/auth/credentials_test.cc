#include "hyperfleet/auth/credentials.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace hf::auth {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "hf-cred-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteAll(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

unsigned ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST(CredentialsParse, StandardFile) {
  auto keys = CredentialStore::Parse(
      "[default]\n"
      "aws_access_key_id = AKIAEXAMPLE1\n"
      "aws_secret_access_key = secret/1+x\n"
      "\n"
      "[ops]\n"
      "aws_access_key_id=AKIAEXAMPLE2\n"
      "aws_secret_access_key=secret2\n");
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys[0].access_key_id, "AKIAEXAMPLE1");
  EXPECT_EQ(keys[0].secret_access_key, "secret/1+x");
  EXPECT_EQ(keys[1].access_key_id, "AKIAEXAMPLE2");
  EXPECT_EQ(keys[1].secret_access_key, "secret2");
}

TEST(CredentialsParse, CommentsSpacingCaseAndLineEndings) {
  auto keys = CredentialStore::Parse(
      "\xEF\xBB\xBF# written by hand\r\n"
      "stray = ignored before any section\r\n"
      "; another comment\r\n"
      "   [  team-a  ]   \r\n"
      "\tAWS_ACCESS_KEY_ID\t=\tAKIATEAMA  \r\n"
      "   # indented comment\r\n"
      "Aws_Secret_Access_Key:   s3cr3t==   \r\n"
      "region = us-west-2\r\n"
      "[default]\n"
      "aws_secret_access_key = first-wins-not\n"
      "aws_access_key_id = AKIADEFAULT\n"
      "aws_secret_access_key = last-wins\n");
  ASSERT_EQ(keys.size(), 2u);
  // [default] comes first whatever its place in the file.
  EXPECT_EQ(keys[0].access_key_id, "AKIADEFAULT");
  EXPECT_EQ(keys[0].secret_access_key, "last-wins");
  EXPECT_EQ(keys[1].access_key_id, "AKIATEAMA");
  EXPECT_EQ(keys[1].secret_access_key, "s3cr3t==");
}

TEST(CredentialsParse, IncompleteSectionsAndGarbageAreSkipped) {
  auto keys = CredentialStore::Parse(
      "[only-id]\n"
      "aws_access_key_id = AKIAONLYID\n"
      "[only-secret]\n"
      "aws_secret_access_key = x\n"
      "[empty-values]\n"
      "aws_access_key_id =\n"
      "aws_secret_access_key =\n"
      "[broken\n"
      "no separator here\n"
      "[ok]\n"
      "aws_access_key_id = AKIAOK\n"
      "aws_secret_access_key = ok\n");
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_EQ(keys[0].access_key_id, "AKIAOK");
  EXPECT_TRUE(CredentialStore::Parse("").empty());
  EXPECT_TRUE(CredentialStore::Parse("\n\n[\n]\n=\n:\n").empty());
}

TEST(CredentialsLoadOrCreate, CreatesFileWithMode0600InNewDirectory) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/data/nested";
  const std::string path = dir + "/credentials";
  std::optional<AccessKey> created;
  auto store = CredentialStore::LoadOrCreate(path, &created);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE(created.has_value());
  EXPECT_TRUE(std::regex_match(created->access_key_id, std::regex("AKIA[A-Z0-9]{16}")))
      << created->access_key_id;
  EXPECT_TRUE(std::regex_match(created->secret_access_key, std::regex("[A-Za-z0-9+/]{40}")))
      << created->secret_access_key;
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_EQ(ModeOf(dir), 0700u);
  EXPECT_EQ(store->secretFor(created->access_key_id), created->secret_access_key);
  ASSERT_EQ(store->all().size(), 1u);

  // No temporary file is left behind.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1);

  // The file is a valid credentials file: loading again finds the same key, creates nothing.
  std::optional<AccessKey> again;
  auto reloaded = CredentialStore::LoadOrCreate(path, &again);
  ASSERT_TRUE(reloaded.ok()) << reloaded.status();
  EXPECT_FALSE(again.has_value());
  ASSERT_EQ(reloaded->all().size(), 1u);
  EXPECT_EQ(reloaded->all()[0].access_key_id, created->access_key_id);
  EXPECT_EQ(reloaded->all()[0].secret_access_key, created->secret_access_key);
  EXPECT_NE(ReadAll(path).find("[default]"), std::string::npos);
}

TEST(CredentialsLoadOrCreate, FreshKeysDiffer) {
  TempDir tmp;
  std::optional<AccessKey> a, b;
  ASSERT_TRUE(CredentialStore::LoadOrCreate(tmp.path() + "/a", &a).ok());
  ASSERT_TRUE(CredentialStore::LoadOrCreate(tmp.path() + "/b", nullptr).ok());
  ASSERT_TRUE(CredentialStore::LoadOrCreate(tmp.path() + "/c", &b).ok());
  EXPECT_NE(a->access_key_id, b->access_key_id);
  EXPECT_NE(a->secret_access_key, b->secret_access_key);
}

TEST(CredentialsLoadOrCreate, LoadsExistingFile) {
  TempDir tmp;
  const std::string path = tmp.path() + "/credentials";
  WriteAll(path,
           "[other]\naws_access_key_id = AKIAOTHER\naws_secret_access_key = o\n"
           "[default]\naws_access_key_id = AKIADEF\naws_secret_access_key = d\n");
  std::optional<AccessKey> created = AccessKey{"stale", "stale"};
  auto store = CredentialStore::LoadOrCreate(path, &created);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_FALSE(created.has_value());
  EXPECT_EQ(store->all()[0].access_key_id, "AKIADEF");
  EXPECT_EQ(store->secretFor("AKIAOTHER"), "o");
  EXPECT_EQ(store->secretFor("AKIAUNKNOWN"), std::nullopt);
}

TEST(CredentialsLoadOrCreate, Errors) {
  TempDir tmp;
  const std::string empty = tmp.path() + "/empty";
  WriteAll(empty, "# nothing here\n[default]\nregion = us-west-2\n");
  EXPECT_EQ(CredentialStore::LoadOrCreate(empty, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A directory cannot be read as a file (root ignores permission bits, so no chmod test).
  EXPECT_EQ(CredentialStore::LoadOrCreate(tmp.path(), nullptr).status().code(),
            absl::StatusCode::kInternal);
  // The parent "directory" is a file.
  EXPECT_EQ(CredentialStore::LoadOrCreate(empty + "/sub/credentials", nullptr).status().code(),
            absl::StatusCode::kInternal);
}

TEST(CredentialStore, AddReplaceMoveAndConcurrentReads) {
  CredentialStore store;
  store.add({"AKIA1", "one"});
  store.add({"AKIA2", "two"});
  store.add({"AKIA1", "uno"});
  EXPECT_EQ(store.secretFor("AKIA1"), "uno");
  ASSERT_EQ(store.all().size(), 2u);
  EXPECT_EQ(store.all()[0].access_key_id, "AKIA1");

  CredentialStore moved(std::move(store));
  EXPECT_EQ(moved.secretFor("AKIA2"), "two");
  CredentialStore assigned;
  assigned = std::move(moved);
  EXPECT_EQ(assigned.secretFor("AKIA2"), "two");

  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&assigned, t] {
      for (int i = 0; i < 500; ++i) {
        if (t == 0) assigned.add({"AKIAW" + std::to_string(i), "w"});
        EXPECT_EQ(assigned.secretFor("AKIA1"), "uno");
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(assigned.all().size(), 502u);
}

}  // namespace
}  // namespace hf::auth
