/*
 * Apache Iceberg's own REST catalog (org.apache.iceberg.rest.RESTCatalog, hence its RESTSessionCatalog, its
 * OAuth2 manager, ErrorHandlers and commit retries) over the JDK's java.net.http client instead of Apache
 * HttpClient 5.
 *
 * Why: Iceberg's HTTPClient needs HttpClient 5.4 or newer relocated under org.apache.iceberg.shaded, which the
 * official iceberg-spark-runtime jar bundles but the one the tests have (PyPI's snowpark-connect-deps-iceberg) left
 * out, and no registry these machines reach has 5.4 (Debian bookworm's libhttpclient5-java is 5.2.1, which lacks
 * TlsSocketStrategy and ConnectionConfig's builder methods Iceberg 1.10 calls). Iceberg's request classes still use
 * HttpCore 5 (Endpoint, HTTPRequest's URI building): the tests relocate Debian's (tests/support/iceberg_spark.py,
 * rest_jars). Only the transport is replaced:
 * Client extends Iceberg's BaseHTTPClient, which builds every request (paths, query parameters, JSON bodies) as
 * HTTPClient does; like HTTPClient's, this client adds Accept and Content-Type, the catalog's "header.*" properties
 * and X-Client-Version, lets the AuthSession sign the request, treats 200, 202 and 204 as success and gives any
 * other answer to the caller's ErrorHandler (Iceberg's ErrorHandlers turn 409 into CommitFailedException, etc.).
 *
 *   IcebergJdkRest$Catalog  a RESTCatalog whose HTTP client is IcebergJdkRest$Client (for Spark's catalog-impl)
 * Used by tests/integration/test_iceberg_spark.py and IcebergWritersCheck.java.
 */

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Consumer;

import org.apache.iceberg.IcebergBuild;
import org.apache.iceberg.exceptions.RESTException;
import org.apache.iceberg.rest.BaseHTTPClient;
import org.apache.iceberg.rest.ErrorHandler;
import org.apache.iceberg.rest.HTTPHeaders;
import org.apache.iceberg.rest.HTTPRequest;
import org.apache.iceberg.rest.ImmutableHTTPRequest;
import org.apache.iceberg.rest.RESTCatalog;
import org.apache.iceberg.rest.RESTClient;
import org.apache.iceberg.rest.RESTResponse;
import org.apache.iceberg.rest.RESTUtil;
import org.apache.iceberg.rest.auth.AuthSession;
import org.apache.iceberg.rest.responses.ErrorResponse;

public class IcebergJdkRest {
  /** Headers the JDK client sets itself and refuses from callers. */
  private static final Set<String> RESTRICTED = Set.of("connection", "content-length", "expect", "host", "upgrade");

  /** Iceberg's RESTCatalog with the JDK transport: a no-argument constructor, as catalog-impl needs. */
  public static class Catalog extends RESTCatalog {
    public Catalog() {
      super(Client::new);
    }
  }

  public static class Client extends BaseHTTPClient {
    private final URI baseUri;
    private final Map<String, String> baseHeaders;
    private final HttpClient http;
    private final AuthSession session;

    public Client(Map<String, String> properties) {
      this(URI.create(properties.get("uri")), headers(properties),
          HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(30)).build(), AuthSession.EMPTY);
    }

    private Client(URI baseUri, Map<String, String> baseHeaders, HttpClient http, AuthSession session) {
      this.baseUri = baseUri;
      this.baseHeaders = baseHeaders;
      this.http = http;
      this.session = session;
    }

    private static Map<String, String> headers(Map<String, String> properties) {
      Map<String, String> headers = new LinkedHashMap<>(RESTUtil.configHeaders(properties));
      headers.putIfAbsent("X-Client-Version", IcebergBuild.fullVersion());
      headers.putIfAbsent("X-Client-Git-Commit-Short", IcebergBuild.gitCommitShortId());
      return headers;
    }

    @Override
    public RESTClient withAuthSession(AuthSession authSession) {
      return new Client(baseUri, baseHeaders, http, authSession);
    }

    @Override
    protected HTTPRequest buildRequest(HTTPRequest.HTTPMethod method, String path, Map<String, String> queryParams,
                                       Map<String, String> headers, Object body) {
      Map<String, String> all = new LinkedHashMap<>();
      if (headers != null) {
        all.putAll(headers);
      }
      all.putIfAbsent("Accept", "application/json");
      all.putIfAbsent("Content-Type", body instanceof Map ? "application/x-www-form-urlencoded" : "application/json");
      baseHeaders.forEach(all::putIfAbsent);
      HTTPRequest request = ImmutableHTTPRequest.builder().baseUri(baseUri).method(method).path(path).body(body)
          .queryParameters(queryParams == null ? Map.of() : queryParams).headers(HTTPHeaders.of(all)).build();
      return session.authenticate(request);
    }

    @Override
    protected <T extends RESTResponse> T execute(HTTPRequest req, Class<T> responseType,
                                                 Consumer<ErrorResponse> errorHandler,
                                                 Consumer<Map<String, String>> responseHeaders) {
      String body = req.encodedBody();
      HttpRequest.Builder request = HttpRequest.newBuilder(req.requestUri()).timeout(Duration.ofMinutes(5))
          .method(req.method().name(),
              body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body));
      req.headers().entries().forEach(h -> {
        if (!RESTRICTED.contains(h.name().toLowerCase())) {
          request.header(h.name(), h.value());
        }
      });
      HttpResponse<String> response;
      try {
        response = http.send(request.build(), HttpResponse.BodyHandlers.ofString());
      } catch (IOException e) {
        throw new RESTException(e, "Error occurred while processing %s request", req.method());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new RESTException(e, "Interrupted while processing %s request", req.method());
      }
      Map<String, String> answered = new LinkedHashMap<>();
      for (Map.Entry<String, List<String>> h : response.headers().map().entrySet()) {
        answered.put(h.getKey(), String.join(",", h.getValue()));
      }
      responseHeaders.accept(answered);
      int code = response.statusCode();
      boolean ok = code == 200 || code == 202 || code == 204;
      if (code == 204 || (responseType == null && ok)) {
        return null;
      }
      String text = response.body();
      if (!ok) {
        ErrorResponse error = null;
        if (text != null && !text.isEmpty() && errorHandler instanceof ErrorHandler) {
          try {
            error = ((ErrorHandler) errorHandler).parseResponse(code, text);
          } catch (RuntimeException e) {
            error = null;  // not the spec's ErrorModel: answered below from the status alone
          }
        }
        if (error == null) {
          error = ErrorResponse.builder().responseCode(code).withMessage(text == null ? "" : text)
              .withType("RESTException").build();
        }
        errorHandler.accept(error);
        throw new RESTException("Unhandled error: %s", error);
      }
      if (text == null || text.isEmpty()) {
        throw new RESTException("Invalid (null) response body for request (expected %s): method=%s, path=%s, "
            + "status=%d", responseType.getSimpleName(), req.method(), req.path(), code);
      }
      try {
        return req.mapper().readValue(text, responseType);
      } catch (IOException e) {
        throw new RESTException(e, "Received a success response code of %d, but failed to parse response body "
            + "into %s", code, responseType.getSimpleName());
      }
    }

    @Override
    public void close() {
      session.close();
    }
  }
}
