// The tuner reads and sets a bucket planner's caps through the roles its plugin declares
// (ddplab.v1.role), not through the fields' names: a bucket_sizing whose fields are named
// otherwise is read, and a field named bucket_cap_mb without the role is not.
#include "tune/bucket_caps.h"

#include <memory>
#include <string>

#include "ddplab/v1/options.pb.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/dynamic_message.h"
#include "gtest/gtest.h"

namespace ddplab::tune {
namespace {

using google::protobuf::FieldDescriptorProto;

// Two configuration messages built at run time: Sizes declares the roles on fields of its
// own names; NoRoles names its field bucket_cap_mb and declares nothing.
class Planners {
 public:
  Planners() : pool_(google::protobuf::DescriptorPool::generated_pool()) {
    google::protobuf::FileDescriptorProto file;
    file.set_name("tune_test/planners.proto");
    file.set_package("ddplab.testdata.planners.v1");
    file.set_syntax("proto3");
    file.add_dependency("ddplab/v1/options.proto");
    google::protobuf::DescriptorProto* sizes = file.add_message_type();
    sizes->set_name("Sizes");
    AddDouble(*sizes, "mib", 1, v1::BUCKET_CAP_MB);
    AddDouble(*sizes, "first_mib", 2, v1::FIRST_BUCKET_CAP_MB);
    google::protobuf::DescriptorProto* none = file.add_message_type();
    none->set_name("NoRoles");
    AddDouble(*none, "bucket_cap_mb", 1, v1::FIELD_ROLE_UNSPECIFIED);
    const google::protobuf::FileDescriptor* built = pool_.BuildFile(file);
    EXPECT_NE(built, nullptr);
    sizes_ = built->FindMessageTypeByName("Sizes");
    no_roles_ = built->FindMessageTypeByName("NoRoles");
  }

  // A schema of `planner` named `name`, and no_communication (the tuner's other plugin).
  std::shared_ptr<const ExperimentSchema> Schema(const std::string& name, bool roles) const {
    absl::StatusOr<std::shared_ptr<const ExperimentSchema>> schema =
        ExperimentSchema::Build({{name, roles ? sizes_ : no_roles_}, {kNoCommunication, no_roles_}});
    EXPECT_TRUE(schema.ok()) << schema.status();
    return *schema;
  }

 private:
  static void AddDouble(google::protobuf::DescriptorProto& m, const std::string& name, int number, v1::FieldRole role) {
    FieldDescriptorProto* f = m.add_field();
    f->set_name(name);
    f->set_number(number);
    f->set_type(FieldDescriptorProto::TYPE_DOUBLE);
    f->set_label(FieldDescriptorProto::LABEL_OPTIONAL);
    if (role != v1::FIELD_ROLE_UNSPECIFIED) f->mutable_options()->SetExtension(v1::role, role);
  }

  google::protobuf::DescriptorPool pool_;
  const google::protobuf::Descriptor* sizes_ = nullptr;
  const google::protobuf::Descriptor* no_roles_ = nullptr;
};

v1::Experiment With(const ExperimentSchema& schema, const std::string& plugin, const std::string& text) {
  v1::Experiment e;
  absl::StatusOr<v1::Plugin> entry = schema.Entry(plugin, text);
  EXPECT_TRUE(entry.ok()) << entry.status();
  *e.add_plugin() = *entry;
  return e;
}

TEST(BucketCapsTest, ThePlannerIsReadByTheRolesItDeclares) {
  const Planners planners;
  const std::shared_ptr<const ExperimentSchema> schema = planners.Schema(kBucketSizing, /*roles=*/true);
  const Caps caps = CapsOf(With(*schema, kBucketSizing, "mib: 50 first_mib: 2"), *schema);
  EXPECT_EQ(caps.cap_mb, 50);
  EXPECT_EQ(caps.first_mb, 2);
  // The first bucket left out: DDP's rule, min(1 MiB, cap).
  EXPECT_EQ(CapsOf(With(*schema, kBucketSizing, "mib: 0.5"), *schema).first_mb, 0.5);
}

TEST(BucketCapsTest, AFieldNamedAsTheCapButDeclaringNoRoleIsNotRead) {
  const Planners planners;
  const std::shared_ptr<const ExperimentSchema> schema = planners.Schema(kBucketSizing, /*roles=*/false);
  const Caps caps = CapsOf(With(*schema, kBucketSizing, "bucket_cap_mb: 50"), *schema);
  EXPECT_EQ(caps.cap_mb, ddp::kDefaultCapMiB);
  EXPECT_EQ(caps.first_mb, ddp::kFirstBucketMiB);
  const absl::Status s = CanSetCaps(*schema);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("[(ddplab.v1.role) = BUCKET_CAP_MB]"), absl::string_view::npos) << s;
}

TEST(BucketCapsTest, TheCapIsSetThroughItsRole) {
  const Planners planners;
  const std::shared_ptr<const ExperimentSchema> schema = planners.Schema(kBucketSizing, /*roles=*/true);
  ASSERT_TRUE(CanSetCaps(*schema).ok());
  v1::Experiment e;
  *e.add_plugin() = CapEntry(7, *schema);
  EXPECT_EQ(e.plugin(0).name(), kBucketSizing);
  const Caps caps = CapsOf(e, *schema);
  EXPECT_EQ(caps.cap_mb, 7);
  EXPECT_EQ(caps.first_mb, 1);
}

}  // namespace
}  // namespace ddplab::tune
